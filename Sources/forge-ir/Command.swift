#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One verb of the CLI. A new verb is one file with a type conforming to this protocol plus
/// one entry in `commands` (main.swift).
protocol Command {
    static var spec: CommandSpec { get }
    /// Runs with parsed arguments; returns the exit code. Throw `UsageError` for usage problems
    /// (exit 64) and anything else for failures (exit 1).
    static func run(_ args: ParsedArguments) throws -> Int32
}

/// A failure a verb reports as it is (exit 1): the message names the file, option or value.
struct CLIError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// Exit codes of every verb.
enum ExitCode {
    static let ok: Int32 = 0
    static let failure: Int32 = 1
    static let usage: Int32 = 64
}

/// Unbuffered writes to stdout / stderr with write(2). SIGPIPE is ignored (see main.swift); when
/// the reader of stdout has gone (`forge-ir dump … | head`), the process exits quietly with 0.
enum Console {
    static func out(_ s: String) { write(fd: 1, s) }
    static func err(_ s: String) { write(fd: 2, s) }

    static func write(fd: Int32, _ s: String) {
        var s = s
        s.withUTF8 { buf in
            var p = buf.baseAddress
            var left = buf.count
            while left > 0, let base = p {
                #if canImport(Glibc)
                let n = Glibc.write(fd, base, left)
                #else
                let n = Darwin.write(fd, base, left)
                #endif
                if n < 0 {
                    if errno == EINTR { continue }
                    if errno == EPIPE && fd == 1 { exit(ExitCode.ok) }
                    return
                }
                p = base + n
                left -= n
            }
        }
    }
}
