import Foundation

/// The normalizers supported: Unicode normal forms, Lowercase, Replace (string pattern),
/// Prepend, and Sequences of them.
indirect enum Normalizer {
    case nfc, nfd, nfkc, nfkd
    case lowercase
    case replace(pattern: String, content: String)
    case prepend(String)
    case sequence([Normalizer])

    static func parse(_ node: JSONNode) throws -> Normalizer? {
        guard node.exists else { return nil }
        let type = try node["type"].string()
        switch type {
        case "NFC": return .nfc
        case "NFD": return .nfd
        case "NFKC": return .nfkc
        case "NFKD": return .nfkd
        case "Lowercase": return .lowercase
        case "Prepend": return .prepend(try node["prepend"].string())
        case "Replace":
            guard node["pattern"]["String"].exists else {
                throw node["pattern"].unsupported("Replace normalizer with a non-string pattern")
            }
            return .replace(pattern: try node["pattern"]["String"].string(), content: try node["content"].string())
        case "Sequence":
            return .sequence(try node["normalizers"].array().compactMap { try parse($0) })
        default:
            throw node["type"].unsupported("normalizer \(String(reflecting: type)) (supported: NFC, NFD, NFKC, NFKD, Lowercase, Replace, Prepend, Sequence)")
        }
    }

    func apply(_ s: String) -> String {
        // ASCII text is its own NFC / NFD / NFKC / NFKD form
        switch self {
        case .nfc, .nfd, .nfkc, .nfkd:
            if s.utf8.allSatisfy({ $0 < 0x80 }) { return s }
        default: break
        }
        switch self {
        case .nfc: return s.precomposedStringWithCanonicalMapping
        case .nfd: return s.decomposedStringWithCanonicalMapping
        case .nfkc: return s.precomposedStringWithCompatibilityMapping
        case .nfkd: return s.decomposedStringWithCompatibilityMapping
        case .lowercase:
            // Per scalar, as Rust's char::to_lowercase (no final-sigma context rule).
            var out = String.UnicodeScalarView()
            for u in s.unicodeScalars {
                if u.value < 128 {
                    out.append(u.value >= 65 && u.value <= 90 ? Unicode.Scalar(u.value + 32)! : u)
                } else {
                    out.append(contentsOf: u.properties.lowercaseMapping.unicodeScalars)
                }
            }
            return String(out)
        case let .replace(pattern, content):
            return s.replacingScalars(pattern, with: content)
        case let .prepend(p):
            return s.isEmpty ? s : p + s
        case let .sequence(steps):
            return steps.reduce(s) { $1.apply($0) }
        }
    }
}

extension String {
    /// The string cut at every occurrence of `separator`, comparing Unicode scalars (as Rust's
    /// and Python's string functions do; Swift's Character-based functions would not find " "
    /// in " " + U+200D, a single Character).
    /// At most `maxSplits` cuts when it is not negative (Python's `str.split(sep, maxsplit)`);
    /// an empty separator cuts nothing.
    func splitScalars(_ separator: String, maxSplits: Int = -1) -> [String] {
        let s = Array(unicodeScalars), p = Array(separator.unicodeScalars)
        func str(_ r: ArraySlice<Unicode.Scalar>) -> String {
            var v = String.UnicodeScalarView()
            v.append(contentsOf: r)
            return String(v)
        }
        guard !p.isEmpty, s.count >= p.count else { return [self] }
        var out: [String] = []
        var start = 0, i = 0
        while i + p.count <= s.count, maxSplits < 0 || out.count < maxSplits {
            if s[i] == p[0] && s[i..<(i + p.count)].elementsEqual(p) {
                out.append(str(s[start..<i]))
                i += p.count
                start = i
            } else {
                i += 1
            }
        }
        out.append(str(s[start...]))
        return out
    }

    /// Every occurrence of `pattern` replaced by `content`, comparing Unicode scalars.
    func replacingScalars(_ pattern: String, with content: String) -> String {
        if pattern.isEmpty { return self }
        return splitScalars(pattern).joined(separator: content)
    }
}
