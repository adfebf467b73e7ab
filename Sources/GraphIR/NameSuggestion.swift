/// "Did you mean …?" for a mistyped name (an option, a function, an input): the candidate
/// closest by edit distance, when it is close enough to be a likely typo.
public enum NameSuggestion {
    /// The closest candidate within max(2, |word|/3) edits, or nil.
    public static func closest(_ word: String, in candidates: [String]) -> String? {
        let w = Array(word)
        var best: (String, Int)?
        for c in candidates {
            let d = distance(w, Array(c))
            if d <= max(2, w.count / 3), d < (best?.1 ?? Int.max) { best = (c, d) }
        }
        return best?.0
    }

    /// ` (did you mean '<prefix>x'?)`, or "" when nothing is close.
    public static func hint(_ word: String, in candidates: [String], prefix: String = "") -> String {
        closest(word, in: candidates).map { " (did you mean '\(prefix)\($0)'?)" } ?? ""
    }

    /// Levenshtein distance.
    static func distance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var prev = Array(0...b.count)
        var cur = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            cur[0] = i
            for j in 1...b.count {
                cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            swap(&prev, &cur)
        }
        return prev[b.count]
    }
}

extension Program {
    /// "no function 'x' (did you mean 'y'?); the model has: a, b" — one wording everywhere.
    public func noFunctionMessage(_ name: String) -> String {
        let names = functions.map(\.name)
        return "no function '\(name)'" + NameSuggestion.hint(name, in: names) + "; the model has: " + names.joined(separator: ", ")
    }
}
