import Foundation
import GraphIR

/// `--max-memory`: every verb declares it in its `CommandSpec`; `main` applies it before the
/// verb runs.
extension CommonOptions {
    static let maxMemory = OptionSpec.option(
        "max-memory", value: "bytes",
        "Largest allocation from sizes a file declares (e.g. 4G, 512M; default: half of RAM).")

    /// Applies `--max-memory` when the verb declares it.
    static func apply(_ args: ParsedArguments, helpCommand: String) throws {
        guard let text = args.value("max-memory") else { return }
        guard let bytes = MemoryBudget.parse(text) else {
            throw UsageError(message: "--max-memory takes a size in bytes such as 4G, 512M or 1048576, not '\(text)'", helpCommand: helpCommand)
        }
        MemoryBudget.limit = bytes
    }
}

/// One-line error text for the CLI: Foundation file errors as `path: reason` (never the raw
/// `NSCocoaErrorDomain` text), and a path or phrase repeated by nested errors printed once.
enum ErrorText {
    static func describe(_ error: Error) -> String {
        let text = FileErrorText.text(error).split(whereSeparator: \.isNewline).joined(separator: " ")
        return dedupe(text)
    }

    /// `a: a: b` → `a: b`: a segment repeated right after itself (a path named by an error and
    /// again by the error wrapping it) is kept once.
    static func dedupe(_ text: String) -> String {
        var out: [Substring] = []
        for seg in text.split(separator: ": ", omittingEmptySubsequences: false) {
            if let last = out.last, last == seg { continue }
            out.append(seg)
        }
        return out.joined(separator: ": ")
    }
}
