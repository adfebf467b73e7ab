#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Reads the files of a tokenizer folder (`tokenizer.json`, `tokenizer_config.json`,
/// `chat_template.jinja`, `generation_config.json`, a `--messages` chat) without blocking or
/// over-reading: the path (symbolic links followed) must be a regular file of at most ``limit``
/// bytes, so a FIFO waits for no writer and `/dev/zero` is not read forever.
enum TokenizerFile {
    /// 1 GiB: far above the largest `tokenizer.json` in use (~35 MB).
    static let limit = 1 << 30

    /// The file's bytes.
    /// - Throws: `TokenizerError.unreadable` naming the file: missing, not a regular file, too
    ///   large, or unreadable.
    static func read(_ path: String) throws -> Data {
        var st = stat()
        guard stat(path, &st) == 0 else {
            throw TokenizerError.unreadable(file: path, reason: errno == ENOENT ? "no such file" : String(cString: strerror(errno)))
        }
        guard st.st_mode & S_IFMT == S_IFREG else {
            let kind = st.st_mode & S_IFMT == S_IFDIR ? "a folder" : "not a regular file (a FIFO, socket or device)"
            throw TokenizerError.unreadable(file: path, reason: "is \(kind)")
        }
        guard Int(st.st_size) <= limit else {
            throw TokenizerError.unreadable(file: path, reason: "is \(st.st_size) bytes, more than the \(limit)-byte limit")
        }
        do {
            return try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw TokenizerError.unreadable(file: path, reason: error.localizedDescription)
        }
    }
}
