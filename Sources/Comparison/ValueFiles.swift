import Foundation
import GraphIR
import Interpreter
import JSON

/// Files of recorded values: one `.npy` per value, named after the value (as `forge-ir dump`
/// prints it), plus a `values.json` manifest in op order.
///
/// File names: a value name made only of `A–Z a–z 0–9 . _ -` (not starting with `.`) is used
/// as is (`var_42` → `var_42.npy`); any other name has every other character replaced by `_`
/// and `-` plus 8 hex digits of its FNV-1a hash appended (`layers/0/q` →
/// `layers_0_q-1f2e3d4c.npy`), so two names never share a file; names are cut to 120
/// characters before the hash. The manifest maps each name to its file.
public enum ValueFiles {
    public static let manifestName = "values.json"

    public static func fileName(for name: String) -> String {
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
        let clean = !name.isEmpty && name.count <= 120 && !name.hasPrefix(".") && name.allSatisfy { allowed.contains($0) }
        if clean { return name + ".npy" }
        var s = String(name.prefix(120).map { allowed.contains($0) ? $0 : "_" })
        if s.hasPrefix(".") { s = "_" + s.dropFirst() }
        var h: UInt32 = 0x811C_9DC5
        for b in name.utf8 { h = (h ^ UInt32(b)) &* 0x0100_0193 }
        return s + "-" + String(format: "%08x", h) + ".npy"
    }

    /// One recorded value in the manifest.
    public struct Entry {
        public var name: String
        public var file: String
        /// Producing op (nil for a function input).
        public var op: String?
        public var opType: String?
        public var dtype: String
        public var shape: [Int]
    }

    /// Writes values into a folder as they come, up to a byte budget (the `.npy` bytes).
    /// Nothing in the folder other than the files it writes is touched; each file is written
    /// to a temporary name, then renamed.
    public final class Writer {
        public let directory: String
        public let maxBytes: Int
        public private(set) var bytes = 0
        public private(set) var entries: [Entry] = []
        /// The first value that did not fit, and how many were left out.
        public private(set) var firstSkipped: String?
        public private(set) var skipped = 0
        public private(set) var error: Error?
        private var producers: [String: Op] = [:]
        private var written: [String: Int] = [:]
        /// fp16-typed float values held in fp32 (`fp32` precision) are written as `<f4`.
        private let widenHalf: Bool

        /// - Parameters:
        ///   - function: names the producing ops in the manifest.
        ///   - widenHalf: write fp16-typed values as fp32 (`fp32` precision holds them so).
        public init(directory: String, maxBytes: Int, function: Function?, widenHalf: Bool) throws {
            self.directory = directory
            self.maxBytes = maxBytes
            self.widenHalf = widenHalf
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            function?.body.walk { op in for v in op.outputs { producers[v.name] = op } }
        }

        /// Writes `t` as `<dir>/<fileName(name)>` unless the budget is spent (then it is
        /// counted in ``skipped``). The same name written again (a loop body) replaces the file.
        public func write(_ name: String, _ t: Tensor) {
            guard error == nil else { return }
            var t = t
            if widenHalf && t.dtype == .fp16 { t.dtype = .fp32 }
            if case .string = t.data { return }
            do {
                let data = try NPY.encode(t)
                let previous = written[name] ?? 0
                guard bytes - previous + data.count <= maxBytes else {
                    if firstSkipped == nil { firstSkipped = name }
                    skipped += 1
                    return
                }
                let file = ValueFiles.fileName(for: name)
                let path = directory + "/" + file
                do { try data.write(to: URL(fileURLWithPath: path), options: .atomic) } catch {
                    throw NPYError(path, "cannot write: \(error.localizedDescription)")
                }
                bytes += data.count - previous
                if written[name] == nil {
                    let op = producers[name]
                    entries.append(Entry(name: name, file: file, op: op?.name, opType: op?.type, dtype: t.dtype.rawValue, shape: t.shape))
                }
                written[name] = data.count
            } catch {
                self.error = error
            }
        }

        /// Writes `values.json` (merged with a manifest already in the folder: entries of other
        /// names are kept, so `--save-inputs` and `--outputs` may share a folder).
        /// - Throws: the first write error, or a file-system error.
        public func finish(model: String, function: String, precision: String) throws {
            if let error { throw error }
            let path = directory + "/" + ValueFiles.manifestName
            var merged: [JSONValue] = []
            let mine = Set(entries.map(\.name))
            if let old = try? ValueFiles.readManifest(directory) {
                for e in old where !mine.contains(e.name) { merged.append(ValueFiles.json(e)) }
            }
            merged += entries.map(ValueFiles.json)
            let json = JSONValue.object([
                "schema": .int(1), "model": .string(model), "function": .string(function),
                "precision": .string(precision), "values": .array(merged),
            ])
            do { try Data((json.render(pretty: true) + "\n").utf8).write(to: URL(fileURLWithPath: path), options: .atomic) } catch {
                throw NPYError(path, "cannot write: \(error.localizedDescription)")
            }
        }
    }

    static func json(_ e: Entry) -> JSONValue {
        .object([
            "name": .string(e.name), "file": .string(e.file),
            "op": e.op.map { .string($0) } ?? .null, "op_type": e.opType.map { .string($0) } ?? .null,
            "dtype": .string(e.dtype), "shape": .array(e.shape.map { .int($0) }),
        ])
    }

    /// The entries of `<dir>/values.json`.
    /// - Throws: `NPYError` when it is missing or malformed.
    public static func readManifest(_ dir: String) throws -> [Entry] {
        let path = dir + "/" + manifestName
        guard let d = FileManager.default.contents(atPath: path), let text = String(data: d, encoding: .utf8) else {
            throw NPYError(path, "cannot read file")
        }
        let json: JSONValue
        do { json = try JSONValue.parse(text) } catch { throw NPYError(path, "\(error)") }
        guard let values = json["values"]?.arrayValue else { throw NPYError(path, "no 'values' array") }
        return try values.map { v in
            guard let name = v["name"]?.stringValue, let file = v["file"]?.stringValue, !file.contains("/") else {
                throw NPYError(path, "an entry without 'name' and 'file' (or a file outside the folder)")
            }
            return Entry(name: name, file: file, op: v["op"]?.stringValue, opType: v["op_type"]?.stringValue,
                         dtype: v["dtype"]?.stringValue ?? "", shape: v["shape"]?.arrayValue?.compactMap(\.intValue) ?? [])
        }
    }

    /// Every array of a reference: an `.npz` (member names are value names), or a folder of
    /// `.npy` files (names from its `values.json` when there is one, else the file names).
    /// - Throws: `NPYError` for an unreadable file or folder.
    public static func readArrays(_ path: String) throws -> [String: Tensor] {
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDir) else { throw NPYError(path, "no such file or folder") }
        guard isDir.boolValue else { return try NPZ.read(path: path) }
        var out: [String: Tensor] = [:]
        var named = Set<String>()
        if FileManager.default.fileExists(atPath: path + "/" + manifestName) {
            for e in try readManifest(path) {
                out[e.name] = try NPY.read(path: path + "/" + e.file)
                named.insert(e.file)
            }
        }
        let files = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        for f in files.sorted() where f.hasSuffix(".npy") && !named.contains(f) {
            let name = String(f.dropLast(4))
            if out[name] == nil { out[name] = try NPY.read(path: path + "/" + f) }
        }
        return out
    }
}
