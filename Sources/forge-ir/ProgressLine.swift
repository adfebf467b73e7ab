#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One self-overwriting status line on stderr for long runs (`compare`, `reduce`), shown only
/// when stderr is a terminal: nothing at all reaches a pipe or a file.
final class ProgressLine {
    let enabled: Bool
    private var shown = false

    init(enabled: Bool = isatty(2) == 1) { self.enabled = enabled }

    func show(_ text: String) {
        guard enabled else { return }
        Console.err("\r\u{1B}[K" + text)
        shown = true
    }

    /// Erases the line (call before printing results).
    func clear() {
        guard enabled, shown else { return }
        Console.err("\r\u{1B}[K")
        shown = false
    }
}
