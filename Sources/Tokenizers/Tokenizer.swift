import Foundation
import JSON

/// A token of `added_tokens` in `tokenizer.json` (special tokens and user-added tokens), matched
/// in the raw text before pre-tokenization.
public struct AddedToken: Equatable, Sendable {
    public let id: Int
    public let content: String
    /// Special tokens are skipped by `decode(_:skipSpecialTokens: true)`.
    public let special: Bool
    /// Swallow the whitespace on the left / right of a match.
    public let lstrip: Bool
    public let rstrip: Bool
    /// Match only when not glued to word characters on either side.
    public let singleWord: Bool
    /// Match against the normalized text (else against the raw text).
    public let normalized: Bool
}

/// A Hugging Face `tokenizer.json` byte-level BPE tokenizer (GPT-2, Llama-3, Qwen2, SmolLM2
/// families): added/special tokens, normalizer, pre-tokenizer, BPE model, post-processor
/// template and byte-level decoder, with the `tokenizers` library's semantics.
///
/// SentencePiece-style BPE files (Llama-2 / Gemma: `byte_fallback`, a Replace " "→"▁"
/// normalizer, the Replace / ByteFallback / Fuse / Strip decoder chain) work as well.
///
/// Not supported (a `TokenizerError.unsupported` names them): model types other than BPE,
/// pre-tokenizers other than ByteLevel / Split / Digits / Sequence (so no Metaspace), other
/// decoders, `continuing_subword_prefix` / `end_of_word_suffix`, BPE dropout. `truncation` and
/// `padding` are ignored.
public final class Tokenizer: @unchecked Sendable {
    /// The file this tokenizer was read from (used in error messages).
    public let file: String
    /// All added tokens (special or not), by ascending id.
    public let addedTokens: [AddedToken]

    let model: BPEModel
    let normalizer: Normalizer?
    let preTokenizer: PreTokenizer?
    let byteLevel: Bool
    let rawMatcher: AddedTokenMatcher
    let normalizedMatcher: AddedTokenMatcher
    /// Ids the post-processor puts before / after the text when `addSpecialTokens` is true.
    let prefixIds: [Int32]
    let suffixIds: [Int32]
    /// id → bytes the byte-level decoder produces for it (nil: no such id).
    let idBytes: [[UInt8]?]
    /// id → token string.
    let idTokens: [String?]
    let specialIds: Set<Int>
    let addedByContent: [String: Int]
    /// The decoder's steps after the leading per-token Replace steps (already applied in
    /// `idDecoderTokens`); when they are all ByteLevel, decoding is byte concatenation.
    let decoderChain: [DecoderStep]
    let byteLevelDecoder: Bool
    let idDecoderTokens: [String?]
    /// `decoderChain` without the whole-text Strip steps, which are in `streamStrips`.
    let streamChain: [DecoderStep]
    let streamStrips: [(Unicode.Scalar, Int, Int)]

    private let cacheLock = NSLock()
    private var cache: [[UInt8]: [Int32]] = [:]
    private static let cacheCapacity = 50_000
    private static let cacheMaxPieceBytes = 128

    /// Reads `path` (a `tokenizer.json`).
    /// - Throws: `TokenizerError` naming the file and what is unreadable, malformed or unsupported.
    public convenience init(path: String) throws {
        try self.init(data: try TokenizerFile.read(path), file: path)
    }

    /// Parses the contents of a `tokenizer.json`; `file` is only used in error messages.
    public init(data: Data, file: String = "tokenizer.json") throws {
        self.file = file
        let root = try JSONNode.parse(Array(data), file: file)
        guard root.value?.objectValue != nil else { throw root.malformed("expected a JSON object") }
        guard root["model"].exists else { throw root["model"].malformed("missing model") }

        model = try BPEModel(root["model"])
        normalizer = try Normalizer.parse(root["normalizer"])
        preTokenizer = try PreTokenizer.parse(root["pre_tokenizer"])
        byteLevel = preTokenizer?.isByteLevel ?? false

        // added tokens: the id is the model's when the content is in the vocab (as the library
        // re-adds them on load), else the file's
        var added: [AddedToken] = []
        if root["added_tokens"].exists {
            for t in try root["added_tokens"].array() {
                let content = try t["content"].string()
                guard !content.isEmpty else { continue }
                let fileId = try t["id"].tokenID()
                let id = model.vocab[Array(content.utf8)].map(Int.init) ?? fileId
                added.append(AddedToken(
                    id: id, content: content,
                    special: try t["special"].bool(default: false),
                    lstrip: try t["lstrip"].bool(default: false),
                    rstrip: try t["rstrip"].bool(default: false),
                    singleWord: try t["single_word"].bool(default: false),
                    normalized: try t["normalized"].bool(default: !(try t["special"].bool(default: false)))))
            }
        }
        added.sort { $0.id < $1.id }
        addedTokens = added
        var byContent: [String: Int] = [:]
        for t in added { byContent[t.content] = t.id }
        addedByContent = byContent
        specialIds = Set(added.filter { $0.special }.map { $0.id })
        let norm = normalizer
        rawMatcher = AddedTokenMatcher(added.filter { !$0.normalized }.map { (Array($0.content.unicodeScalars), $0) })
        normalizedMatcher = AddedTokenMatcher(added.filter { $0.normalized }.map {
            (Array((norm?.apply($0.content) ?? $0.content).unicodeScalars), $0)
        })

        // decoder
        let chain = try DecoderStep.parseChain(root["decoder"])
        byteLevelDecoder = chain.allSatisfy { $0 == .byteLevel }
        // leading Replace steps act on each token alone: applied once per id below
        let perToken = chain.prefix { if case .replace = $0 { return true } else { return false } }
        decoderChain = Array(chain.dropFirst(perToken.count))
        // Strip steps after a fusing step act on the whole text, i.e. on the stream's start and
        // end: the streaming decoder applies them itself and decodes windows without them
        var fused = false, streamChain: [DecoderStep] = [], streamStrips: [(Unicode.Scalar, Int, Int)] = []
        for step in decoderChain {
            if case let .strip(c, a, b) = step, fused { streamStrips.append((c, a, b)); continue }
            if step == .fuse || step == .byteLevel { fused = true }
            streamChain.append(step)
        }
        self.streamChain = streamChain
        self.streamStrips = streamStrips

        // id tables
        var maxId = model.tokens.count - 1
        for t in added { maxId = max(maxId, t.id) }
        var toks = [String?](repeating: nil, count: maxId + 1)
        for (i, t) in model.tokens.enumerated() { toks[i] = t }
        for t in added { toks[t.id] = t.content }
        idTokens = toks
        idBytes = toks.map { t in t.map { ByteLevelTable.bytes(of: $0) ?? Array($0.utf8) } }
        idDecoderTokens = byteLevelDecoder ? [] : toks.map { t in
            t.map { tok in perToken.reduce([tok]) { $1.apply($0) }[0] }
        }

        // post-processor
        var pre: [Int32] = [], post: [Int32] = []
        try Tokenizer.parsePostProcessor(root["post_processor"], prefix: &pre, suffix: &post,
                                         lookup: { [model, byContent] tok in
                                             byContent[tok].map { Int32($0) } ?? model.vocab[Array(tok.utf8)]
                                         })
        prefixIds = pre
        suffixIds = post
    }

    private static func parsePostProcessor(_ node: JSONNode, prefix: inout [Int32], suffix: inout [Int32],
                                           lookup: (String) -> Int32?) throws {
        guard node.exists else { return }
        let type = try node["type"].string()
        switch type {
        case "ByteLevel":
            return
        case "Sequence":
            for p in try node["processors"].array() {
                try parsePostProcessor(p, prefix: &prefix, suffix: &suffix, lookup: lookup)
            }
        case "TemplateProcessing":
            let specials = node["special_tokens"]
            var seenSequence = false
            for item in try node["single"].array() {
                if item["Sequence"].exists {
                    guard !seenSequence else { throw item.unsupported("TemplateProcessing with two sequences in `single`") }
                    seenSequence = true
                } else if item["SpecialToken"].exists {
                    let name = try item["SpecialToken"]["id"].string()
                    var ids: [Int32] = []
                    if specials[name].exists {
                        ids = try specials[name]["ids"].array().map { Int32(try $0.tokenID()) }
                    } else if let id = lookup(name) {
                        ids = [id]
                    } else {
                        throw item.malformed("special token \(String(reflecting: name)) not in special_tokens")
                    }
                    if seenSequence { suffix.append(contentsOf: ids) } else { prefix.append(contentsOf: ids) }
                } else {
                    throw item.malformed("expected {\"Sequence\": …} or {\"SpecialToken\": …}")
                }
            }
        case "RobertaProcessing", "BertProcessing":
            let cls = try node["cls"].array(), sep = try node["sep"].array()
            guard cls.count == 2, sep.count == 2 else { throw node.malformed("cls / sep must be [token, id]") }
            prefix.append(Int32(try cls[1].tokenID()))
            suffix.append(Int32(try sep[1].tokenID()))
        default:
            throw node["type"].unsupported("post-processor \(String(reflecting: type))")
        }
    }

    // MARK: vocabulary

    /// One more than the largest id (model vocabulary and added tokens).
    public var vocabularySize: Int { idTokens.count }

    /// The id of a token string (added tokens first, then the model vocabulary).
    public func tokenToId(_ token: String) -> Int? {
        if let id = addedByContent[token] { return id }
        return model.vocab[Array(token.utf8)].map(Int.init)
    }

    /// The token string of an id (byte-level form for model tokens, e.g. "Ġthe").
    public func idToToken(_ id: Int) -> String? {
        id >= 0 && id < idTokens.count ? idTokens[id] : nil
    }

    /// True for ids of added tokens flagged special.
    public func isSpecial(_ id: Int) -> Bool { specialIds.contains(id) }

    /// The added tokens flagged special, content → id.
    public var specialTokens: [String: Int] {
        Dictionary(addedTokens.filter { $0.special }.map { ($0.content, $0.id) }, uniquingKeysWith: { a, _ in a })
    }

    /// The ids the post-processor adds around a text (e.g. `[<|begin_of_text|>]` for Llama-3).
    public var addedSpecialIds: (prefix: [Int], suffix: [Int]) {
        (prefixIds.map(Int.init), suffixIds.map(Int.init))
    }

    // MARK: encoding

    /// Token ids of `text`. `addSpecialTokens` applies the post-processor's template (as the
    /// `tokenizers` library's `encode(text, add_special_tokens=True)`, its default); chat text
    /// rendered by a `ChatTemplate` already holds its special tokens, so encode it with `false`.
    public func encode(_ text: String, addSpecialTokens: Bool = true) -> [Int] {
        var ids: [Int32] = []
        ids.reserveCapacity(text.utf8.count / 3 + 4)
        if addSpecialTokens { ids.append(contentsOf: prefixIds) }
        let scalars = Array(text.unicodeScalars)
        for (range, token) in rawMatcher.split(scalars) {
            if let token { ids.append(Int32(token.id)); continue }
            var segment = Array(scalars[range])
            if let normalizer {
                var view = String.UnicodeScalarView()
                view.append(contentsOf: segment)
                segment = Array(normalizer.apply(String(view)).unicodeScalars)
            }
            for (r2, t2) in normalizedMatcher.split(segment) {
                if let t2 { ids.append(Int32(t2.id)); continue }
                encodeSegment(r2.count == segment.count ? segment : Array(segment[r2]), into: &ids)
            }
        }
        if addSpecialTokens { ids.append(contentsOf: suffixIds) }
        return ids.map(Int.init)
    }

    /// The pre-tokenizer alone (no normalizer, no added tokens) on `text`: the pieces in the form
    /// the BPE model sees them (byte-level strings such as "Ġworld" in byte-level pipelines), as
    /// the `tokenizers` library's `pre_tokenizer.pre_tokenize_str`. A debugging view.
    public func preTokenize(_ text: String) -> [String] {
        let scalars = Array(text.unicodeScalars)
        let pieces = scalars.isEmpty ? [] : (preTokenizer?.apply([scalars]) ?? [scalars])
        return pieces.filter { !$0.isEmpty }.map { piece in
            var v = String.UnicodeScalarView()
            if byteLevel {
                for u in piece { UTF8.encode(u) { v.append(ByteLevelTable.byteToScalar[Int($0)]) } }
            } else {
                v.append(contentsOf: piece)
            }
            return String(v)
        }
    }

    /// Pre-tokenizes and BPE-encodes text that holds no added token.
    private func encodeSegment(_ segment: [Unicode.Scalar], into ids: inout [Int32]) {
        let pieces = preTokenizer?.apply([segment]) ?? [segment]
        var bytes: [UInt8] = []
        for piece in pieces where !piece.isEmpty {
            bytes.removeAll(keepingCapacity: true)
            for u in piece { UTF8.encode(u) { bytes.append($0) } }
            let cacheable = bytes.count <= Tokenizer.cacheMaxPieceBytes
            if cacheable {
                cacheLock.lock()
                let hit = cache[bytes]
                cacheLock.unlock()
                if let hit { ids.append(contentsOf: hit); continue }
            }
            var out: [Int32] = []
            if byteLevel {
                model.tokenize(byteLevel: bytes, into: &out)
            } else {
                model.tokenize(chars: piece, into: &out)
            }
            ids.append(contentsOf: out)
            if cacheable {
                cacheLock.lock()
                if cache.count >= Tokenizer.cacheCapacity { cache.removeAll(keepingCapacity: true) }
                cache[bytes] = out
                cacheLock.unlock()
            }
        }
    }

    // MARK: decoding

    /// The UTF-8 of `decode(ids)`; for the byte-level decoder, the raw bytes (possibly an
    /// unfinished character at the end).
    public func decodeBytes(_ ids: [Int], skipSpecialTokens: Bool = false) -> [UInt8] {
        guard byteLevelDecoder else { return Array(decode(ids, skipSpecialTokens: skipSpecialTokens).utf8) }
        var out: [UInt8] = []
        for id in ids { appendBytes(of: id, skipSpecialTokens: skipSpecialTokens, to: &out) }
        return out
    }

    /// Text of `ids` through the decoder (unknown ids are skipped, as the library does); invalid
    /// UTF-8 (a cut-off multi-byte character) becomes U+FFFD.
    public func decode(_ ids: [Int], skipSpecialTokens: Bool = false) -> String {
        if byteLevelDecoder {
            var out: [UInt8] = []
            for id in ids { appendBytes(of: id, skipSpecialTokens: skipSpecialTokens, to: &out) }
            return String(decoding: out, as: UTF8.self)
        }
        return decode(ids, skipSpecialTokens: skipSpecialTokens, chain: decoderChain)
    }

    /// A decoder chain (other than pure ByteLevel) on `ids`.
    func decode<C: Collection>(_ ids: C, skipSpecialTokens: Bool, chain: [DecoderStep]) -> String where C.Element == Int {
        var tokens: [String] = []
        tokens.reserveCapacity(ids.count)
        for id in ids {
            guard id >= 0 && id < idDecoderTokens.count, let t = idDecoderTokens[id] else { continue }
            if skipSpecialTokens && specialIds.contains(id) { continue }
            tokens.append(t)
        }
        for step in chain { tokens = step.apply(tokens) }
        return tokens.joined()
    }

    func appendBytes(of id: Int, skipSpecialTokens: Bool, to out: inout [UInt8]) {
        guard id >= 0 && id < idBytes.count, let b = idBytes[id] else { return }
        if skipSpecialTokens && specialIds.contains(id) { return }
        out.append(contentsOf: b)
    }

    /// A decoder that turns ids into text as they arrive (see `StreamingDecoder`).
    public func streamingDecoder(skipSpecialTokens: Bool = false) -> StreamingDecoder {
        StreamingDecoder(tokenizer: self, skipSpecialTokens: skipSpecialTokens)
    }
}

/// Leftmost-longest matching of added tokens (a trie over Unicode scalars), with the
/// `single_word`, `lstrip` and `rstrip` rules of the `tokenizers` library.
final class AddedTokenMatcher {
    private var children: [[UInt32: Int32]] = [[:]]
    private var terminal: [Int32] = [-1]
    private let tokens: [AddedToken]

    init(_ patterns: [([Unicode.Scalar], AddedToken)]) {
        tokens = patterns.map { $0.1 }
        for (index, (pattern, _)) in patterns.enumerated() where !pattern.isEmpty {
            var node = 0
            for u in pattern {
                if let c = children[node][u.value] {
                    node = Int(c)
                } else {
                    children.append([:]); terminal.append(-1)
                    children[node][u.value] = Int32(children.count - 1)
                    node = children.count - 1
                }
            }
            if terminal[node] < 0 { terminal[node] = Int32(index) }
        }
    }

    var isEmpty: Bool { tokens.isEmpty }

    /// The text cut into non-empty ranges, each either plain text (nil) or an added token.
    func split(_ s: [Unicode.Scalar]) -> [(Range<Int>, AddedToken?)] {
        let n = s.count
        if n == 0 { return [] }
        if tokens.isEmpty { return [(0..<n, nil)] }
        var out: [(Range<Int>, AddedToken?)] = []
        var startOffset = 0
        var i = 0
        let root = children[0]
        while i < n {
            guard var node = root[s[i].value].map(Int.init) else { i += 1; continue }
            var j = i + 1
            var best = terminal[node], bestEnd = j
            while j < n, let c = children[node][s[j].value] {
                node = Int(c); j += 1
                if terminal[node] >= 0 { best = terminal[node]; bestEnd = j }
            }
            guard best >= 0 else { i += 1; continue }
            var start = i, stop = bestEnd
            i = bestEnd
            let t = tokens[Int(best)]
            if t.singleWord {
                let startOK = start == 0 || !CharClass.isWordChar(s[start - 1])
                let stopOK = stop == n || !CharClass.isWordChar(s[stop])
                if !(startOK && stopOK) { continue }
            }
            if t.lstrip {
                var ns = start
                while ns > 0 && s[ns - 1].properties.isWhitespace { ns -= 1 }
                start = max(ns, startOffset)
            }
            if t.rstrip {
                while stop < n && s[stop].properties.isWhitespace { stop += 1 }
            }
            if startOffset < start { out.append((startOffset..<start, nil)) }
            out.append((start..<stop, t))
            startOffset = stop
        }
        if startOffset < n { out.append((startOffset..<n, nil)) }
        return out
    }
}
