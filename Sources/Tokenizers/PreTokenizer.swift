import Foundation

// MARK: - character classes

/// Unicode classes the known split regexes use: `\p{L}`, `\p{N}`, `\s` (White_Space, as
/// Oniguruma's `\s` in Unicode mode) and `[\r\n]`.
enum CharClass {
    static let letter: UInt8 = 1
    static let number: UInt8 = 2
    static let space: UInt8 = 4
    static let newline: UInt8 = 8

    static let ascii: [UInt8] = (0..<128).map { b -> UInt8 in
        let c = UInt8(b)
        if (c >= 65 && c <= 90) || (c >= 97 && c <= 122) { return letter }
        if c >= 48 && c <= 57 { return number }
        if c == 10 || c == 13 { return space | newline }
        if (c >= 9 && c <= 13) || c == 32 { return space }
        return 0
    }

    @inline(__always)
    static func of(_ u: Unicode.Scalar) -> UInt8 {
        let v = u.value
        if v < 128 { return ascii[Int(v)] }
        return nonASCII(u)
    }

    static func nonASCII(_ u: Unicode.Scalar) -> UInt8 {
        let p = u.properties
        switch p.generalCategory {
        case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter:
            return letter
        case .decimalNumber, .letterNumber, .otherNumber:
            return number
        default:
            return p.isWhitespace ? space : 0
        }
    }

    /// Rust's `char::is_numeric` (the Digits pre-tokenizer): general categories Nd, Nl, No.
    @inline(__always)
    static func isNumeric(_ u: Unicode.Scalar) -> Bool { of(u) & number != 0 }

    /// Rust regex's Unicode `\w`: Alphabetic, marks, Pc, Nd, Join_Control (added tokens'
    /// `single_word`).
    static func isWordChar(_ u: Unicode.Scalar) -> Bool {
        if u.value < 128 {
            let c = UInt8(u.value)
            return ascii[Int(c)] & (letter | number) != 0 || c == 95
        }
        let p = u.properties
        if p.isAlphabetic || p.isJoinControl { return true }
        switch p.generalCategory {
        case .nonspacingMark, .spacingMark, .enclosingMark, .connectorPunctuation, .decimalNumber: return true
        default: return false
        }
    }
}

// MARK: - hand-written scanners for the known split regexes

/// The split regexes of the common byte-level tokenizers, matched by hand-written scanners that
/// follow the regexes' leftmost-first alternation exactly (and are much faster than `Regex`).
enum KnownPattern: Equatable {
    /// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+` (GPT-2,
    /// the ByteLevel pre-tokenizer's own regex).
    case gpt2
    /// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
    /// (Llama-3, maxDigits 3) and the same with `\p{N}` (Qwen2, maxDigits 1).
    case llama3(maxDigits: Int)

    static let gpt2Source = #"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"#
    static let llama3Source = #"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"#
    static let qwen2Source = #"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"#

    init?(source: String) {
        switch source {
        case Self.gpt2Source: self = .gpt2
        case Self.llama3Source: self = .llama3(maxDigits: 3)
        case Self.qwen2Source: self = .llama3(maxDigits: 1)
        default: return nil
        }
    }

    /// End of the match that starts at `i` (every scalar starts a match of these patterns).
    @inline(__always)
    func match(_ s: UnsafeBufferPointer<Unicode.Scalar>, _ i: Int) -> Int {
        switch self {
        case .gpt2: return Self.matchGPT2(s, i)
        case let .llama3(k): return Self.matchLlama3(s, i, maxDigits: k)
        }
    }

    @inline(__always)
    private static func run(_ s: UnsafeBufferPointer<Unicode.Scalar>, from i: Int, while mask: UInt8) -> Int {
        var j = i
        while j < s.count && CharClass.of(s[j]) & mask != 0 { j += 1 }
        return j
    }

    /// Run of `[^\s\p{L}\p{N}]`.
    @inline(__always)
    private static func runOther(_ s: UnsafeBufferPointer<Unicode.Scalar>, from i: Int) -> Int {
        var j = i
        while j < s.count && CharClass.of(s[j]) & (CharClass.letter | CharClass.number | CharClass.space) == 0 { j += 1 }
        return j
    }

    /// `\s+(?!\S)|\s+` at a whitespace scalar.
    @inline(__always)
    private static func matchSpaces(_ s: UnsafeBufferPointer<Unicode.Scalar>, _ i: Int) -> Int {
        let j = run(s, from: i, while: CharClass.space)
        if j == s.count { return j }
        return j - i >= 2 ? j - 1 : j
    }

    static func matchGPT2(_ s: UnsafeBufferPointer<Unicode.Scalar>, _ i: Int) -> Int {
        let n = s.count
        let c = s[i]
        if c == "'" && i + 1 < n {
            switch s[i + 1] {
            case "s", "t", "m", "d": return i + 2
            case "r", "v": if i + 2 < n && s[i + 2] == "e" { return i + 3 }
            case "l": if i + 2 < n && s[i + 2] == "l" { return i + 3 }
            default: break
            }
        }
        let cc = CharClass.of(c)
        let nc: UInt8 = i + 1 < n ? CharClass.of(s[i + 1]) : CharClass.space  // "space" = no match
        let isSpace = c == " "
        // ` ?\p{L}+`
        if isSpace && nc & CharClass.letter != 0 { return run(s, from: i + 1, while: CharClass.letter) }
        if cc & CharClass.letter != 0 { return run(s, from: i, while: CharClass.letter) }
        // ` ?\p{N}+`
        if isSpace && nc & CharClass.number != 0 { return run(s, from: i + 1, while: CharClass.number) }
        if cc & CharClass.number != 0 { return run(s, from: i, while: CharClass.number) }
        // ` ?[^\s\p{L}\p{N}]+`
        if isSpace && i + 1 < n && nc == 0 { return runOther(s, from: i + 1) }
        if cc == 0 { return runOther(s, from: i) }
        return matchSpaces(s, i)
    }

    /// ASCII-lowercase plus U+017F (ſ), which case-folds to "s" under `(?i)`.
    @inline(__always)
    private static func folded(_ u: Unicode.Scalar) -> Unicode.Scalar {
        if u.value >= 65 && u.value <= 90 { return Unicode.Scalar(u.value + 32)! }
        if u.value == 0x17F { return "s" }
        return u
    }

    static func matchLlama3(_ s: UnsafeBufferPointer<Unicode.Scalar>, _ i: Int, maxDigits: Int) -> Int {
        let n = s.count
        let c = s[i]
        if c == "'" && i + 1 < n {
            switch folded(s[i + 1]) {
            case "s", "t", "m", "d": return i + 2
            case "r", "v": if i + 2 < n && folded(s[i + 2]) == "e" { return i + 3 }
            case "l": if i + 2 < n && folded(s[i + 2]) == "l" { return i + 3 }
            default: break
            }
        }
        let cc = CharClass.of(c)
        // `[^\r\n\p{L}\p{N}]?\p{L}+`
        if cc & (CharClass.letter | CharClass.number | CharClass.newline) == 0 && i + 1 < n
            && CharClass.of(s[i + 1]) & CharClass.letter != 0 {
            return run(s, from: i + 1, while: CharClass.letter)
        }
        if cc & CharClass.letter != 0 { return run(s, from: i, while: CharClass.letter) }
        // `\p{N}{1,k}`
        if cc & CharClass.number != 0 {
            var j = i + 1
            while j < n && j - i < maxDigits && CharClass.of(s[j]) & CharClass.number != 0 { j += 1 }
            return j
        }
        // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
        var start = -1
        if c == " " && i + 1 < n && CharClass.of(s[i + 1]) == 0 { start = i + 1 } else if cc == 0 { start = i }
        if start >= 0 {
            let j = runOther(s, from: start)
            return run(s, from: j, while: CharClass.newline)
        }
        // whitespace from here: `\s*[\r\n]+` ends after the run's last newline
        let j = run(s, from: i, while: CharClass.space)
        var m = j - 1
        while m >= i && CharClass.of(s[m]) & CharClass.newline == 0 { m -= 1 }
        if m >= i { return m + 1 }
        if j == n { return j }
        return j - i >= 2 ? j - 1 : j
    }
}

/// A Swift `Regex` for split patterns that no hand-written scanner covers (unicode-scalar
/// semantics, like the Rust library's regex engines; `Regex` needs macOS 13 on Apple platforms).
final class RegexBox {
    let source: String
    private let storage: Any

    init(_ source: String) throws {
        self.source = source
        if #available(macOS 13.0, iOS 16.0, tvOS 16.0, watchOS 9.0, *) {
            storage = try Regex(source).matchingSemantics(.unicodeScalar)
        } else {
            throw RegexUnavailable()
        }
    }

    struct RegexUnavailable: Error, CustomStringConvertible {
        var description: String { "Regex needs macOS 13 / iOS 16" }
    }

    func matches(in str: String) -> [Range<String.Index>] {
        if #available(macOS 13.0, iOS 16.0, tvOS 16.0, watchOS 9.0, *) {
            let re = storage as! Regex<AnyRegexOutput>
            return str.matches(of: re).map { $0.range }
        }
        return []
    }
}

// MARK: - split machinery (HF `NormalizedString::split`)

/// `SplitDelimiterBehavior` of the tokenizers library.
enum SplitBehavior: String {
    case removed = "Removed"
    case isolated = "Isolated"
    case mergedWithPrevious = "MergedWithPrevious"
    case mergedWithNext = "MergedWithNext"
    case contiguous = "Contiguous"
}

/// What a Split pre-tokenizer looks for.
enum SplitPattern {
    case known(KnownPattern)
    case literal([Unicode.Scalar])
    case regex(RegexBox)

    /// Matches in `s` as (start, end, isMatch) covering all of `s` (offsets relative to `s`).
    func findMatches(_ s: UnsafeBufferPointer<Unicode.Scalar>) -> [(Int, Int, Bool)] {
        let n = s.count
        if n == 0 { return [(0, 0, false)] }
        var out: [(Int, Int, Bool)] = []
        switch self {
        case let .known(k):
            var i = 0
            while i < n {
                let j = k.match(s, i)
                out.append((i, j, true))
                i = j
            }
            return out
        case let .literal(lit):
            var prev = 0, i = 0
            if lit.isEmpty { return [(0, n, false)] }
            while i + lit.count <= n {
                var ok = true
                for (k, u) in lit.enumerated() where s[i + k] != u { ok = false; break }
                if ok {
                    if prev < i { out.append((prev, i, false)) }
                    out.append((i, i + lit.count, true))
                    i += lit.count
                    prev = i
                } else {
                    i += 1
                }
            }
            if prev < n { out.append((prev, n, false)) }
            return out
        case let .regex(re):
            var view = String.UnicodeScalarView()
            view.append(contentsOf: s)
            let str = String(view)
            var prev = 0
            var cursor = str.startIndex
            var offset = 0
            func offsetOf(_ idx: String.Index) -> Int {
                offset += str.unicodeScalars.distance(from: cursor, to: idx)
                cursor = idx
                return offset
            }
            for r in re.matches(in: str) {
                let a = offsetOf(r.lowerBound)
                let b = offsetOf(r.upperBound)
                if prev != a { out.append((prev, a, false)) }
                out.append((a, b, true))
                prev = b
            }
            if prev != n { out.append((prev, n, false)) }
            return out
        }
    }
}

/// Applies a split behaviour to matches (HF semantics, including which pieces merge) and returns
/// the kept ranges; empty ranges are dropped as the library drops empty splits.
func applySplitBehavior(_ matches: [(Int, Int, Bool)], _ behavior: SplitBehavior, invert: Bool) -> [Range<Int>] {
    let ms = invert ? matches.map { ($0.0, $0.1, !$0.2) } : matches
    let out: [(Int, Int, Bool)]  // (start, end, remove)
    switch behavior {
    case .isolated:
        out = ms.map { ($0.0, $0.1, false) }
    case .removed:
        out = ms.map { ($0.0, $0.1, $0.2) }
    case .contiguous:
        out = mergeSplits(ms, backwards: false) { isMatch, previousMatch in isMatch == previousMatch }
    case .mergedWithPrevious:
        out = mergeSplits(ms, backwards: false) { isMatch, previousMatch in isMatch && !previousMatch }
    case .mergedWithNext:
        out = mergeSplits(ms, backwards: true) { isMatch, previousMatch in isMatch && !previousMatch }
    }
    return out.compactMap { $0.2 || $0.0 == $0.1 ? nil : $0.0..<$0.1 }
}

/// HF's merging loops of `applySplitBehavior`: walking the pieces (from the end when
/// `backwards`), a piece joins the last kept one when `joins(isMatch, previousMatch)`, else it
/// starts a new kept piece. Returns (start, end, remove = false) in text order.
private func mergeSplits(_ pieces: [(Int, Int, Bool)], backwards: Bool, _ joins: (Bool, Bool) -> Bool) -> [(Int, Int, Bool)] {
    var out: [(Int, Int, Bool)] = []
    var previousMatch = false
    for (a, b, isMatch) in backwards ? Array(pieces.reversed()) : pieces {
        if joins(isMatch, previousMatch), !out.isEmpty {
            if backwards { out[out.count - 1].0 = a } else { out[out.count - 1].1 = b }
        } else {
            out.append((a, b, false))
        }
        previousMatch = isMatch
    }
    return backwards ? Array(out.reversed()) : out
}

// MARK: - pre-tokenizers

/// The pre-tokenizers supported: ByteLevel, Split, Digits and Sequences of them.
indirect enum PreTokenizer {
    case byteLevel(addPrefixSpace: Bool, useRegex: Bool)
    case split(SplitPattern, SplitBehavior, invert: Bool)
    case digits(individual: Bool)
    case sequence([PreTokenizer])

    /// True when a ByteLevel step maps the pieces to byte-level strings.
    var isByteLevel: Bool {
        switch self {
        case .byteLevel: return true
        case let .sequence(steps): return steps.contains { $0.isByteLevel }
        default: return false
        }
    }

    static func parse(_ node: JSONNode) throws -> PreTokenizer? {
        guard node.exists else { return nil }
        let type = try node["type"].string()
        switch type {
        case "ByteLevel":
            return .byteLevel(addPrefixSpace: try node["add_prefix_space"].bool(default: true),
                              useRegex: try node["use_regex"].bool(default: true))
        case "Digits":
            return .digits(individual: try node["individual_digits"].bool(default: false))
        case "Split":
            let behaviorName = try node["behavior"].string()
            guard let behavior = SplitBehavior(rawValue: behaviorName) else {
                throw node["behavior"].unsupported("Split behavior \(String(reflecting: behaviorName))")
            }
            let p = node["pattern"]
            let pattern: SplitPattern
            if p["Regex"].exists {
                let source = try p["Regex"].string()
                if let k = KnownPattern(source: source) {
                    pattern = .known(k)
                } else {
                    do {
                        pattern = .regex(try RegexBox(source))
                    } catch {
                        throw p["Regex"].unsupported("Split regex \(String(reflecting: source)) (Swift Regex: \(error))")
                    }
                }
            } else if p["String"].exists {
                pattern = .literal(Array(try p["String"].string().unicodeScalars))
            } else {
                throw p.malformed("Split pattern must be {\"Regex\": …} or {\"String\": …}")
            }
            return .split(pattern, behavior, invert: try node["invert"].bool(default: false))
        case "Sequence":
            let steps = try node["pretokenizers"].array().compactMap { try parse($0) }
            return .sequence(steps)
        default:
            throw node["type"].unsupported("pre-tokenizer \(String(reflecting: type)) (supported: ByteLevel, Split, Digits, Sequence)")
        }
    }

    /// Splits every piece; pieces are scalar arrays.
    func apply(_ pieces: [[Unicode.Scalar]]) -> [[Unicode.Scalar]] {
        switch self {
        case let .sequence(steps):
            var p = pieces
            for s in steps { p = s.apply(p) }
            return p
        default:
            var out: [[Unicode.Scalar]] = []
            out.reserveCapacity(pieces.count * 2)
            for piece in pieces { split(piece, into: &out) }
            return out
        }
    }

    private func split(_ piece: [Unicode.Scalar], into out: inout [[Unicode.Scalar]]) {
        switch self {
        case let .byteLevel(addPrefixSpace, useRegex):
            var p = piece
            if addPrefixSpace && p.first != " " { p.insert(" ", at: 0) }
            guard useRegex else { out.append(p); return }
            p.withUnsafeBufferPointer { s in
                var i = 0
                while i < s.count {
                    let j = KnownPattern.matchGPT2(s, i)
                    out.append(Array(s[i..<j]))
                    i = j
                }
            }
        case let .split(pattern, behavior, invert):
            piece.withUnsafeBufferPointer { s in
                if case let .known(k) = pattern, behavior == .isolated, !invert {
                    var i = 0
                    while i < s.count {
                        let j = k.match(s, i)
                        out.append(Array(s[i..<j]))
                        i = j
                    }
                    return
                }
                for r in applySplitBehavior(pattern.findMatches(s), behavior, invert: invert) {
                    out.append(Array(s[r]))
                }
            }
        case let .digits(individual):
            piece.withUnsafeBufferPointer { s in
                var ms: [(Int, Int, Bool)] = []
                if s.isEmpty {
                    ms = [(0, 0, false)]
                } else {
                    var last = 0
                    for i in 0..<s.count where CharClass.isNumeric(s[i]) {
                        if last < i { ms.append((last, i, false)) }
                        ms.append((i, i + 1, true))
                        last = i + 1
                    }
                    if last < s.count { ms.append((last, s.count, false)) }
                }
                for r in applySplitBehavior(ms, individual ? .isolated : .contiguous, invert: false) {
                    out.append(Array(s[r]))
                }
            }
        case .sequence:
            out.append(contentsOf: apply([piece]))
        }
    }
}
