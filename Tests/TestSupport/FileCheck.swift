import XCTest

/// A small FileCheck (LLVM) for golden text tests of passes. Directives, one per line:
/// - `CHECK: text` — the next line (at or after the current position) containing `text`;
/// - `CHECK-NEXT: text` — the very next line contains `text`;
/// - `CHECK-NOT: text` — no line between the previous match and the next match contains `text`;
/// - `CHECK-COUNT-N: text` — exactly N lines of the whole input contain `text`.
/// Leading/trailing spaces of patterns are ignored; matching is by substring.
public enum FileCheck {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public static func check(_ input: String, _ checks: String) throws {
        let lines = input.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var pos = 0
        var pendingNot: [String] = []
        func fail(_ msg: String) -> Failure {
            Failure(description: msg + "\n--- input ---\n" + input)
        }
        for raw in checks.split(separator: "\n") {
            let line = raw.trimmingCharacters(in: .whitespaces)
            guard !line.isEmpty else { continue }
            guard let colon = line.firstIndex(of: ":") else { continue }
            let directive = String(line[..<colon])
            let pattern = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            switch directive {
            case "CHECK":
                guard let i = (pos..<lines.count).first(where: { lines[$0].contains(pattern) }) else {
                    throw fail("CHECK: '\(pattern)' not found after line \(pos)")
                }
                for n in pendingNot { if let bad = (pos..<i).first(where: { lines[$0].contains(n) }) { throw fail("CHECK-NOT: '\(n)' found at line \(bad): \(lines[bad])") } }
                pendingNot = []
                pos = i + 1
            case "CHECK-NEXT":
                guard pos < lines.count, lines[pos].contains(pattern) else {
                    throw fail("CHECK-NEXT: '\(pattern)' is not on line \(pos): \(pos < lines.count ? lines[pos] : "<end>")")
                }
                pos += 1
            case "CHECK-NOT":
                pendingNot.append(pattern)
            default:
                if directive.hasPrefix("CHECK-COUNT-"), let n = Int(directive.dropFirst("CHECK-COUNT-".count)) {
                    let count = lines.filter { $0.contains(pattern) }.count
                    guard count == n else { throw fail("CHECK-COUNT-\(n): '\(pattern)' found \(count) times") }
                } else {
                    throw fail("unknown directive \(directive)")
                }
            }
        }
        for n in pendingNot { if let bad = (pos..<lines.count).first(where: { lines[$0].contains(n) }) { throw fail("CHECK-NOT: '\(n)' found at line \(bad): \(lines[bad])") } }
    }
}

