#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Foundation
import JSON

/// What `ModelWriter` may replace, and the temporary folders it leaves behind when killed.
///
/// - An existing output is replaced only when it is empty or is itself an `.mlpackage` forge-ir
///   recognises: a `Manifest.json` naming a root model, and nothing but `Manifest.json` and
///   `Data/` at the top, with every file under `Data/` inside an item the manifest lists.
///   Anything else (a folder of user files, a package with extra files) is refused unless
///   forced.
/// - A package is built in `<out>.tmp-<random>`; an existing one is moved to `<out>.old-<random>`
///   while the new one is renamed into place. A kill in between leaves those behind:
///   ``cleanStaleTemporaries(of:)`` removes the `.tmp-*` ones and the `.old-*` ones once `<out>`
///   exists again (an `.old-*` with no `<out>` is renamed back to `<out>`), and SIGINT/SIGTERM
///   during a write clean up before exiting.
public enum OutputSafety {
    /// Why `path` is not a package forge-ir recognises, or nil when it is one.
    public static func unrecognisedPackageReason(_ path: String) -> String? {
        let fm = FileManager.default
        guard let top = try? fm.contentsOfDirectory(atPath: path) else { return "it cannot be listed" }
        if top.isEmpty { return nil }
        let extra = top.filter { $0 != "Manifest.json" && $0 != "Data" }
        guard extra.isEmpty else { return "it holds \(extra.sorted().prefix(3).joined(separator: ", ")), which no .mlpackage holds" }
        guard let data = try? SafeFile.read(path + "/Manifest.json", limit: 1 << 20),
              let json = (try? JSONValue.parse(bytes: data))?.objectValue,
              json["rootModelIdentifier"]?.stringValue != nil,
              let entries = json["itemInfoEntries"]?.objectValue else {
            return "its Manifest.json is not an .mlpackage manifest"
        }
        let items = entries.compactMap { $0.value["path"]?.stringValue }
        guard let walker = fm.enumerator(atPath: path + "/Data") else { return nil }
        while let rel = walker.nextObject() as? String {
            var isDir: ObjCBool = false
            _ = fm.fileExists(atPath: path + "/Data/" + rel, isDirectory: &isDir)
            if isDir.boolValue { continue }
            let listed = items.contains { rel == $0 || rel.hasPrefix($0 + "/") }
            if !listed { return "Data/\(rel) is not an item of its Manifest.json" }
        }
        return nil
    }

    /// Removes `<dest>.tmp-*` and `<dest>.old-*` left by an interrupted write (restoring an
    /// `.old-*` when `dest` itself is missing). Returns what it did, for a message.
    @discardableResult
    public static func cleanStaleTemporaries(of dest: String) -> [String] {
        let parent = (dest as NSString).deletingLastPathComponent
        let dir = parent.isEmpty ? "." : parent
        let base = (dest as NSString).lastPathComponent
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: dir) else { return [] }
        var done: [String] = []
        func ours(_ name: String, _ tag: String) -> Bool {
            guard name.hasPrefix(base + tag) else { return false }
            let suffix = name.dropFirst(base.count + tag.count)
            return !suffix.isEmpty && suffix.count <= 13 && suffix.allSatisfy { $0.isASCII && ($0.isLowercase || $0.isNumber) }
        }
        let path = { (n: String) in parent.isEmpty ? n : parent + "/" + n }
        for n in names.sorted() where ours(n, ".tmp-") {
            try? FileManager.default.removeItem(atPath: path(n))
            done.append("removed the unfinished \(path(n))")
        }
        for n in names.sorted() where ours(n, ".old-") {
            var st = stat()
            if lstat(dest, &st) != 0, rename(path(n), dest) == 0 {
                done.append("restored \(dest) from \(path(n))")
            } else {
                try? FileManager.default.removeItem(atPath: path(n))
                done.append("removed the leftover \(path(n))")
            }
        }
        return done
    }

    // MARK: - cleanup on SIGINT / SIGTERM

    private static let lock = NSLock()
    nonisolated(unsafe) private static var pending: [String: String] = [:]   // temp path → dest
    nonisolated(unsafe) private static var sources: [DispatchSourceSignal] = []

    /// Registers `tmp` (a temporary of `dest`) for removal if the process is interrupted.
    static func track(_ tmp: String, dest: String) {
        lock.lock()
        defer { lock.unlock() }
        pending[tmp] = dest
        if sources.isEmpty {
            for sig in [SIGINT, SIGTERM] {
                signal(sig, SIG_IGN)
                let s = DispatchSource.makeSignalSource(signal: sig, queue: .global())
                s.setEventHandler {
                    lock.lock()
                    let left = pending
                    lock.unlock()
                    for (t, d) in left {
                        try? FileManager.default.removeItem(atPath: t)
                        cleanStaleTemporaries(of: d)
                    }
                    let msg = "forge-ir: interrupted; removed unfinished output\n"
                    _ = msg.withCString { write(2, $0, strlen($0)) }
                    _exit(128 + sig)
                }
                s.resume()
                sources.append(s)
            }
        }
    }

    static func untrack(_ tmp: String) {
        lock.lock()
        pending[tmp] = nil
        lock.unlock()
    }
}
