/// The decoder of a `tokenizer.json`: the byte-level decoder (GPT-2 family) or a chain of the
/// SentencePiece-style steps (Llama-2 / Gemma family: Replace "▁"→" ", ByteFallback, Fuse,
/// Strip), applied with the `tokenizers` library's `decode_chain` semantics.
enum DecoderStep: Equatable {
    case byteLevel
    case replace(pattern: String, content: String)
    case byteFallback
    case fuse
    case strip(content: Unicode.Scalar, start: Int, stop: Int)

    static func parseChain(_ node: JSONNode) throws -> [DecoderStep] {
        guard node.exists else {
            throw node.unsupported("tokenizer without a decoder")
        }
        let type = try node["type"].string()
        switch type {
        case "ByteLevel": return [.byteLevel]
        case "ByteFallback": return [.byteFallback]
        case "Fuse": return [.fuse]
        case "Replace":
            guard node["pattern"]["String"].exists else {
                throw node["pattern"].unsupported("Replace decoder with a non-string pattern")
            }
            return [.replace(pattern: try node["pattern"]["String"].string(), content: try node["content"].string())]
        case "Strip":
            let content = try node["content"].string()
            guard content.unicodeScalars.count == 1 else { throw node["content"].malformed("Strip content must be one character") }
            return [.strip(content: content.unicodeScalars.first!, start: try node["start"].int(), stop: try node["stop"].int())]
        case "Sequence":
            return try node["decoders"].array().flatMap { try parseChain($0) }
        default:
            throw node["type"].unsupported("decoder \(String(reflecting: type)) (supported: ByteLevel, Replace, ByteFallback, Fuse, Strip, Sequence)")
        }
    }

    /// `<0xAB>` → 0xAB.
    static func byteToken(_ t: String) -> UInt8? {
        let u = Array(t.utf8)
        guard u.count == 6, u[0] == 60, u[1] == 48, u[2] == 120, u[5] == 62 else { return nil }
        return UInt8(String(decoding: u[3..<5], as: UTF8.self), radix: 16)
    }

    /// One step of `decode_chain` on the token strings.
    func apply(_ tokens: [String]) -> [String] {
        switch self {
        case .byteLevel:
            var bytes: [UInt8] = []
            for t in tokens { bytes.append(contentsOf: ByteLevelTable.bytes(of: t) ?? Array(t.utf8)) }
            return [String(decoding: bytes, as: UTF8.self)]
        case let .replace(pattern, content):
            guard !pattern.isEmpty else { return tokens }
            return tokens.map { $0.replacingScalars(pattern, with: content) }
        case .byteFallback:
            var out: [String] = []
            var group: [UInt8] = []
            func flush() {
                guard !group.isEmpty else { return }
                if let s = String(validatingUTF8Bytes: group) {
                    out.append(s)
                } else {
                    out.append(contentsOf: repeatElement("\u{FFFD}", count: group.count))
                }
                group.removeAll()
            }
            for t in tokens {
                if let b = DecoderStep.byteToken(t) { group.append(b); continue }
                flush()
                out.append(t)
            }
            flush()
            return out
        case .fuse:
            return [tokens.joined()]
        case let .strip(content, start, stop):
            return tokens.map { t in
                let v = Array(t.unicodeScalars)
                var a = 0
                while a < min(start, v.count) && v[a] == content { a += 1 }
                var b = v.count
                while v.count - b < stop && b > a && v[b - 1] == content { b -= 1 }
                var s = String.UnicodeScalarView()
                s.append(contentsOf: v[a..<b])
                return String(s)
            }
        }
    }
}

extension String {
    /// The string of `bytes` if they are valid UTF-8, else nil.
    init?(validatingUTF8Bytes bytes: [UInt8]) {
        var it = bytes.makeIterator()
        var utf8 = UTF8()
        var scalars = String.UnicodeScalarView()
        loop: while true {
            switch utf8.decode(&it) {
            case let .scalarValue(u): scalars.append(u)
            case .emptyInput: break loop
            case .error: return nil
            }
        }
        self = String(scalars)
    }
}
