import Foundation
import JSON

/// Byte-pair-encoding model of a `tokenizer.json` (`model.type == "BPE"`): vocab, merges by
/// rank, `ignore_merges`, `byte_fallback`, `unk_token` / `fuse_unk`.
final class BPEModel {
    /// Model vocabulary: token string (as UTF-8 bytes, so that canonically-equivalent strings stay
    /// distinct) → id.
    let vocab: [[UInt8]: Int32]
    /// id → token string for the model vocabulary (nil where an id is unused).
    let tokens: [String?]
    /// (left id << 32 | right id) → (rank << 32 | merged id).
    let merges: [UInt64: UInt64]
    /// For byte-level pipelines: byte → id of its byte-level character token (-1 if absent).
    let byteIds: [Int32]
    /// For `ignore_merges` with byte-level pipelines: raw bytes of a token → id.
    let byteLevelVocab: [[UInt8]: Int32]
    let ignoreMerges: Bool
    let byteFallback: Bool
    let unkId: Int32?
    let fuseUnk: Bool

    init(_ node: JSONNode) throws {
        let type = try node["type"].optionalString() ?? "BPE"
        guard type == "BPE" else {
            throw node["type"].unsupported("model type \(String(reflecting: type)) (only BPE is supported)")
        }
        if let d = try node["dropout"].double(), d > 0 {
            throw node["dropout"].unsupported("BPE dropout \(d)")
        }
        for key in ["continuing_subword_prefix", "end_of_word_suffix"] {
            if let v = try node[key].optionalString(), !v.isEmpty {
                throw node[key].unsupported("BPE \(key) \(String(reflecting: v))")
            }
        }
        ignoreMerges = try node["ignore_merges"].bool(default: false)
        byteFallback = try node["byte_fallback"].bool(default: false)
        fuseUnk = try node["fuse_unk"].bool(default: false)

        // vocab
        let vnode = node["vocab"]
        let raw = try vnode.object()
        var vocab: [[UInt8]: Int32] = [:]
        vocab.reserveCapacity(raw.count)
        var maxId = -1
        var pairs: [(String, Int)] = []
        pairs.reserveCapacity(raw.count)
        for (tok, idValue) in raw {
            // (the node and its path are built only for an error message)
            let id = try idValue.intValue ?? JSONNode(idValue, path: vnode.path + "[\(String(reflecting: tok))]", file: vnode.file).int()
            guard id >= 0 && id <= JSONNode.maxTokenID else {
                throw vnode.malformed("id \(id) of \(String(reflecting: tok)) out of range (0...\(JSONNode.maxTokenID))")
            }
            vocab[Array(tok.utf8)] = Int32(id)
            pairs.append((tok, id))
            maxId = max(maxId, id)
        }
        var tokens = [String?](repeating: nil, count: maxId + 1)
        for (tok, id) in pairs { tokens[id] = tok }
        self.vocab = vocab
        self.tokens = tokens

        if let unk = try node["unk_token"].optionalString() {
            guard let id = vocab[Array(unk.utf8)] else { throw node["unk_token"].malformed("unk_token \(String(reflecting: unk)) not in vocab") }
            unkId = id
        } else {
            unkId = nil
        }

        // merges: "a b" strings or [a, b] arrays; a later duplicate overrides the rank (as the
        // Rust library's HashMap collect does)
        let mnode = node["merges"]
        var merges: [UInt64: UInt64] = [:]
        if mnode.exists {
            guard let list = mnode.value?.arrayValue else { throw mnode.malformed("expected an array") }
            merges.reserveCapacity(list.count)
            for (rank, value) in list.enumerated() {
                let m = LazyNode(value: value, parent: mnode, index: rank)
                let a: String, b: String
                if let s = value.stringValue {
                    // split on the byte " " (not on Characters: " " + U+200D is one Character)
                    let parts = s.utf8.split(separator: 0x20, omittingEmptySubsequences: false)
                    guard parts.count == 2 else { throw m.malformed("merge \(String(reflecting: s)) is not two space-separated tokens") }
                    a = String(decoding: parts[0], as: UTF8.self); b = String(decoding: parts[1], as: UTF8.self)
                } else if let arr = value.arrayValue, arr.count == 2, let x = arr[0].stringValue, let y = arr[1].stringValue {
                    a = x; b = y
                } else {
                    throw m.malformed("merge must be \"a b\" or [\"a\", \"b\"]")
                }
                guard let ia = vocab[Array(a.utf8)] else { throw m.malformed("merge token \(String(reflecting: a)) not in vocab") }
                guard let ib = vocab[Array(b.utf8)] else { throw m.malformed("merge token \(String(reflecting: b)) not in vocab") }
                guard let inew = vocab[Array((a + b).utf8)] else { throw m.malformed("merged token \(String(reflecting: a + b)) not in vocab") }
                merges[UInt64(UInt32(ia)) << 32 | UInt64(UInt32(ib))] = UInt64(rank) << 32 | UInt64(UInt32(inew))
            }
        }
        self.merges = merges

        var byteIds = [Int32](repeating: -1, count: 256)
        for b in 0..<256 {
            var s = String.UnicodeScalarView()
            s.append(ByteLevelTable.byteToScalar[b])
            byteIds[b] = vocab[Array(String(s).utf8)] ?? -1
        }
        self.byteIds = byteIds

        var blv: [[UInt8]: Int32] = [:]
        if ignoreMerges {
            blv.reserveCapacity(pairs.count)
            for (tok, id) in pairs {
                if let bytes = ByteLevelTable.bytes(of: tok) { blv[bytes] = Int32(id) }
            }
        }
        byteLevelVocab = blv
    }

    /// Ids for one pre-tokenized piece of a byte-level pipeline (`bytes` = the piece's UTF-8).
    func tokenize(byteLevel bytes: [UInt8], into out: inout [Int32]) {
        if ignoreMerges, let id = byteLevelVocab[bytes] { out.append(id); return }
        var symbols: [Int32] = []
        symbols.reserveCapacity(bytes.count)
        var unkRun = false
        for b in bytes {
            let id = byteIds[Int(b)]
            if id >= 0 {
                symbols.append(id); unkRun = false
            } else {
                // as the Rust library: the fallback bytes are those of the byte-level character
                var s = String.UnicodeScalarView()
                s.append(ByteLevelTable.byteToScalar[Int(b)])
                _ = resolveMissing(bytes: Array(String(s).utf8), into: &symbols, unkRun: &unkRun)
            }
        }
        merge(&symbols, into: &out)
    }

    /// Ids for one piece of a pipeline without byte-level mapping: the initial symbols are the
    /// piece's characters (Unicode scalars).
    func tokenize(chars: [Unicode.Scalar], into out: inout [Int32]) {
        var utf8: [UInt8] = []
        for u in chars { UTF8.encode(u) { utf8.append($0) } }
        if ignoreMerges, let id = vocab[utf8] { out.append(id); return }
        var symbols: [Int32] = []
        symbols.reserveCapacity(chars.count)
        var unkRun = false
        for u in chars {
            var key: [UInt8] = []
            UTF8.encode(u) { key.append($0) }
            if let id = vocab[key] {
                symbols.append(id); unkRun = false
            } else {
                _ = resolveMissing(bytes: key, into: &symbols, unkRun: &unkRun)
            }
        }
        merge(&symbols, into: &out)
    }

    /// A character not in the vocab: `<0xXX>` byte tokens with byte_fallback, else the unknown
    /// token (fused with a preceding one when fuse_unk), else dropped (as the Rust library does).
    private func resolveMissing(bytes: [UInt8], into symbols: inout [Int32], unkRun: inout Bool) -> Bool {
        if byteFallback {
            var ids: [Int32] = []
            for b in bytes {
                let name = String(format: "<0x%02X>", b)
                guard let id = vocab[Array(name.utf8)] else { ids = []; break }
                ids.append(id)
            }
            if !ids.isEmpty { symbols.append(contentsOf: ids); unkRun = false; return true }
        }
        if let unk = unkId {
            if !(fuseUnk && unkRun) { symbols.append(unk) }
            unkRun = true
            return true
        }
        return false
    }

    /// Merges by rank with a binary heap, exactly as the Rust library's `Word::merge_all`:
    /// lowest rank first, ties to the leftmost position, stale heap entries skipped.
    func merge(_ symbols: inout [Int32], into out: inout [Int32]) {
        let n = symbols.count
        if n < 2 { out.append(contentsOf: symbols); return }
        var prev = [Int32](repeating: -1, count: n)
        var next = [Int32](repeating: -1, count: n)
        var alive = [Bool](repeating: true, count: n)
        for i in 0..<n {
            prev[i] = Int32(i - 1)
            next[i] = i + 1 < n ? Int32(i + 1) : -1
        }
        var heap = MergeHeap()
        for i in 0..<(n - 1) {
            if let m = merges[UInt64(UInt32(symbols[i])) << 32 | UInt64(UInt32(symbols[i + 1]))] {
                heap.push(key: (m >> 32) << 32 | UInt64(i), newId: Int32(truncatingIfNeeded: m & 0xFFFF_FFFF))
            }
        }
        while let (key, newId) = heap.pop() {
            let pos = Int(key & 0xFFFF_FFFF)
            guard alive[pos], next[pos] >= 0 else { continue }
            let np = Int(next[pos])
            guard let m = merges[UInt64(UInt32(symbols[pos])) << 32 | UInt64(UInt32(symbols[np]))],
                  Int32(truncatingIfNeeded: m & 0xFFFF_FFFF) == newId else { continue }
            symbols[pos] = newId
            alive[np] = false
            let nn = next[np]
            next[pos] = nn
            if nn >= 0 { prev[Int(nn)] = Int32(pos) }
            let pp = prev[pos]
            if pp >= 0, let m2 = merges[UInt64(UInt32(symbols[Int(pp)])) << 32 | UInt64(UInt32(newId))] {
                heap.push(key: (m2 >> 32) << 32 | UInt64(pp), newId: Int32(truncatingIfNeeded: m2 & 0xFFFF_FFFF))
            }
            if nn >= 0, let m3 = merges[UInt64(UInt32(newId)) << 32 | UInt64(UInt32(symbols[Int(nn)]))] {
                heap.push(key: (m3 >> 32) << 32 | UInt64(pos), newId: Int32(truncatingIfNeeded: m3 & 0xFFFF_FFFF))
            }
        }
        for i in 0..<n where alive[i] { out.append(symbols[i]) }
    }
}

/// An array element whose `JSONNode` (with its path string) is made only for an error.
private struct LazyNode {
    let value: JSONValue
    let parent: JSONNode
    let index: Int
    func malformed(_ reason: String) -> TokenizerError {
        JSONNode(value, path: "\(parent.path)[\(index)]", file: parent.file).malformed(reason)
    }
}

/// Min-heap of (rank << 32 | position, new id).
struct MergeHeap {
    private var keys: [UInt64] = []
    private var ids: [Int32] = []

    mutating func push(key: UInt64, newId: Int32) {
        keys.append(key); ids.append(newId)
        var i = keys.count - 1
        while i > 0 {
            let p = (i - 1) / 2
            if keys[p] <= keys[i] { break }
            keys.swapAt(p, i); ids.swapAt(p, i)
            i = p
        }
    }

    mutating func pop() -> (UInt64, Int32)? {
        guard let top = keys.first else { return nil }
        let topId = ids[0]
        let lastK = keys.removeLast(), lastI = ids.removeLast()
        if !keys.isEmpty {
            keys[0] = lastK; ids[0] = lastI
            var i = 0
            let n = keys.count
            while true {
                let l = 2 * i + 1, r = l + 1
                var m = i
                if l < n && keys[l] < keys[m] { m = l }
                if r < n && keys[r] < keys[m] { m = r }
                if m == i { break }
                keys.swapAt(m, i); ids.swapAt(m, i)
                i = m
            }
        }
        return (top, topId)
    }
}
