/// Turns token ids into text as they arrive, never emitting half a UTF-8 character: a
/// multi-byte character split across tokens (common for CJK and emoji in byte-level BPE, and for
/// `<0xXX>` byte-fallback tokens) is held back until its last byte arrives. The concatenation of
/// everything `push` and `finish` return equals `Tokenizer.decode` of all the ids.
public struct StreamingDecoder {
    public let tokenizer: Tokenizer
    public let skipSpecialTokens: Bool
    private var pending: [UInt8] = []
    /// For decoder chains other than ByteLevel: the ids since the stream began, the start of
    /// the window that is decoded again, and the end of what was emitted.
    private var ids: [Int] = []
    private var prefixOffset = 0
    private var readOffset = 0
    /// Whole-text Strip steps: progress through the leading ones, the trailing run held back.
    private var startStrip = 0
    private var startStripped = 0
    private var heldTail = String.UnicodeScalarView()

    public init(tokenizer: Tokenizer, skipSpecialTokens: Bool = false) {
        self.tokenizer = tokenizer
        self.skipSpecialTokens = skipSpecialTokens
    }

    /// Bytes held back because they start a character that is not complete yet.
    public var pendingByteCount: Int { pending.count }

    /// Adds one id; returns the text it completes (possibly empty).
    public mutating func push(_ id: Int) -> String {
        push(CollectionOfOne(id))
    }

    /// Adds several ids; returns the text they complete.
    public mutating func push<S: Sequence>(_ ids: S) -> String where S.Element == Int {
        guard tokenizer.byteLevelDecoder else {
            self.ids.append(contentsOf: ids)
            return emitChain(final: false)
        }
        for id in ids { tokenizer.appendBytes(of: id, skipSpecialTokens: skipSpecialTokens, to: &pending) }
        return emit()
    }

    /// Ends the stream: what is still held back is decoded (an unfinished character becomes
    /// U+FFFD, as in `decode`).
    public mutating func finish() -> String {
        guard tokenizer.byteLevelDecoder else {
            defer {
                ids.removeAll(); prefixOffset = 0; readOffset = 0
                startStrip = 0; startStripped = 0; heldTail = String.UnicodeScalarView()
            }
            return emitChain(final: true)
        }
        defer { pending.removeAll() }
        return String(decoding: pending, as: UTF8.self)
    }

    /// Other decoder chains (SentencePiece style): decode a window that starts a few tokens
    /// back, `ids[prefixOffset..<end]`, and emit what it adds to `ids[prefixOffset..<readOffset]`.
    /// A trailing run of `<0xXX>` byte tokens is held back: ByteFallback decides a run as a
    /// whole when it ends. Whole-text Strip steps (Llama-2's leading space) are applied here to
    /// the stream's start and end.
    private mutating func emitChain(final: Bool) -> String {
        var end = ids.count
        if !final {
            while end > readOffset, let t = tokenizer.idToToken(ids[end - 1]), DecoderStep.byteToken(t) != nil,
                  !(skipSpecialTokens && tokenizer.isSpecial(ids[end - 1])) {
                end -= 1
            }
        }
        var piece = String.UnicodeScalarView()
        if end > readOffset {
            let chain = tokenizer.streamChain
            let before = tokenizer.decode(ids[prefixOffset..<readOffset], skipSpecialTokens: skipSpecialTokens, chain: chain)
            let after = tokenizer.decode(ids[prefixOffset..<end], skipSpecialTokens: skipSpecialTokens, chain: chain)
            let known = before.unicodeScalars.count
            let scalars = after.unicodeScalars
            if scalars.count > known {
                piece.append(contentsOf: scalars[scalars.index(scalars.startIndex, offsetBy: known)...])
            }
            prefixOffset = readOffset
            readOffset = end
            if prefixOffset >= 4096 {  // forget ids no window will reach again
                ids.removeFirst(prefixOffset)
                readOffset -= prefixOffset
                prefixOffset = 0
            }
        }
        return stripped(piece, final: final)
    }

    /// Applies the whole-text Strip steps to the stream: leading characters while the stream has
    /// not started, a trailing run of the last step's character held back until more text comes.
    private mutating func stripped(_ piece: String.UnicodeScalarView, final: Bool) -> String {
        let strips = tokenizer.streamStrips
        if strips.isEmpty { return String(piece) }
        var out = String.UnicodeScalarView()
        for u in piece {
            while startStrip < strips.count {
                let (c, n, _) = strips[startStrip]
                if u == c && startStripped < n { break }
                startStrip += 1; startStripped = 0
            }
            if startStrip < strips.count { startStripped += 1; continue }  // stripped
            out.append(u)
        }
        // trailing: hold back a run of the last step's character while it could be the end
        let (c, _, stop) = strips[strips.count - 1]
        guard stop > 0 else { return String(out) }
        var all = heldTail
        all.append(contentsOf: out)
        var cut = all.endIndex
        while cut > all.startIndex, all[all.index(before: cut)] == c { cut = all.index(before: cut) }
        heldTail = String.UnicodeScalarView(all[cut...])
        var text = String.UnicodeScalarView(all[..<cut])
        if final {
            let keep = max(0, heldTail.count - stop)
            text.append(contentsOf: heldTail.prefix(keep))
            heldTail = String.UnicodeScalarView()
        }
        return String(text)
    }

    private mutating func emit() -> String {
        let cut = StreamingDecoder.completePrefixLength(pending)
        if cut == 0 { return "" }
        let text = String(decoding: pending[..<cut], as: UTF8.self)
        pending.removeFirst(cut)
        return text
    }

    /// Length of `bytes` without a trailing *valid but incomplete* UTF-8 sequence. Bytes that
    /// can never become valid are not held: the lossy decoder replaces them the same way
    /// whatever follows, so emitting them now keeps streaming equal to a full decode.
    static func completePrefixLength(_ bytes: [UInt8]) -> Int {
        let n = bytes.count
        var p = n - 1
        // find the last non-continuation byte among the last 4
        while p >= 0 && p >= n - 4 && bytes[p] & 0xC0 == 0x80 { p -= 1 }
        guard p >= 0 && p >= n - 4 else { return n }
        let lead = bytes[p]
        let need: Int
        var lo: UInt8 = 0x80, hi: UInt8 = 0xBF  // allowed range of the second byte
        switch lead {
        case 0xC2...0xDF: need = 2
        case 0xE0: need = 3; lo = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: need = 3
        case 0xED: need = 3; hi = 0x9F
        case 0xF0: need = 4; lo = 0x90
        case 0xF1...0xF3: need = 4
        case 0xF4: need = 4; hi = 0x8F
        default: return n  // ASCII or an invalid lead byte
        }
        let have = n - p
        guard have < need else { return n }  // complete (or over-long: invalid either way)
        if have >= 2 && !(lo...hi).contains(bytes[p + 1]) { return n }
        return p
    }
}
