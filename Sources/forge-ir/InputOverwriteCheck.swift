#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Refuses an output path that names the input model itself, after resolving `.`, `..` and
/// symbolic links: `optimize`, `extract` and `reduce` write their package atomically, but over
/// the input that would still replace the user's original with the result.
enum InputOverwriteCheck {
    /// - Throws: `UsageError` when `output` resolves to the same file or folder as `input`
    ///   (nothing is thrown when either does not exist yet).
    static func refuse(output: String, sameAs input: String) throws {
        guard let a = resolved(input), let b = resolved(output), a == b else { return }
        throw UsageError(message: "-o \(output) is the input model itself; write the result to another path")
    }

    /// The canonical absolute path of an existing file or folder, or nil.
    static func resolved(_ path: String) -> String? {
        guard let p = realpath(path, nil) else { return nil }
        defer { free(p) }
        return String(cString: p)
    }
}
