#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Reads files a user points forge-ir at without blocking or over-reading: the path must be a
/// regular file (a FIFO, socket or device such as `/dev/zero` is refused before it is opened),
/// it is opened non-blocking, checked again on the descriptor, and read up to its size, which
/// must not exceed the caller's limit.
public enum SafeFile {
    public enum Failure: Error, Equatable, CustomStringConvertible {
        case missing(path: String)
        case notRegular(path: String, kind: String)
        case tooLarge(path: String, size: Int, limit: Int)
        case unreadable(path: String, reason: String)

        public var path: String {
            switch self {
            case let .missing(p), let .notRegular(p, _), let .tooLarge(p, _, _), let .unreadable(p, _): return p
            }
        }
        /// What went wrong, without the path.
        public var reason: String {
            switch self {
            case .missing: return "no such file"
            case let .notRegular(_, kind): return "is \(kind), not a regular file"
            case let .tooLarge(_, size, limit): return "is \(size) bytes, more than the \(limit)-byte limit"
            case let .unreadable(_, reason): return "cannot be read: \(reason)"
            }
        }
        public var description: String { "\(path): \(reason)" }
    }

    /// The kind of a non-regular file for messages ("a FIFO", "a character device"…), or nil
    /// for a regular file. Follows symbolic links.
    public static func kind(mode: mode_t) -> String? {
        switch mode & S_IFMT {
        case S_IFREG: return nil
        case S_IFDIR: return "a folder"
        case S_IFIFO: return "a FIFO (named pipe)"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        case S_IFSOCK: return "a socket"
        default: return "not a regular file"
        }
    }

    /// - Throws: ``Failure`` when `path` is missing or not a regular file.
    public static func requireRegular(_ path: String) throws {
        var st = stat()
        guard stat(path, &st) == 0 else {
            if errno == ENOENT || errno == ENOTDIR { throw Failure.missing(path: path) }
            throw Failure.unreadable(path: path, reason: String(cString: strerror(errno)))
        }
        if let k = kind(mode: st.st_mode) { throw Failure.notRegular(path: path, kind: k) }
    }

    /// Opens `path` read-only and non-blocking after checking it is a regular file.
    /// Returns the descriptor and the file's size; the caller closes it.
    public static func openRegular(_ path: String) throws -> (fd: Int32, size: Int) {
        try requireRegular(path)
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw Failure.unreadable(path: path, reason: String(cString: strerror(errno))) }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            close(fd)
            throw Failure.unreadable(path: path, reason: String(cString: strerror(errno)))
        }
        if let k = kind(mode: st.st_mode) {
            close(fd)
            throw Failure.notRegular(path: path, kind: k)
        }
        return (fd, Int(st.st_size))
    }

    /// The whole file, at most `limit` bytes (default: the memory budget).
    /// - Throws: ``Failure``.
    public static func read(_ path: String, limit: Int? = nil) throws -> Data {
        let (fd, size) = try openRegular(path)
        defer { close(fd) }
        let cap = limit ?? MemoryBudget.limit
        guard size <= cap else { throw Failure.tooLarge(path: path, size: size, limit: cap) }
        var data = Data(count: size)
        var done = 0
        let failure: String? = data.withUnsafeMutableBytes { raw -> String? in
            guard let base = raw.baseAddress else { return nil }
            while done < size {
                let n = sysRead(fd, base + done, size - done)
                if n < 0 {
                    if errno == EINTR { continue }
                    return String(cString: strerror(errno))
                }
                if n == 0 { break }   // the file shrank while reading
                done += n
            }
            return nil
        }
        if let failure { throw Failure.unreadable(path: path, reason: failure) }
        if done < size { data.removeSubrange(done...) }
        return data
    }

    private static func sysRead(_ fd: Int32, _ p: UnsafeMutableRawPointer, _ n: Int) -> Int {
        #if canImport(Glibc)
        return Glibc.read(fd, p, n)
        #else
        return Darwin.read(fd, p, n)
        #endif
    }
}
