#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Writes `Model`s as Core ML files: an `.mlpackage` folder (spec + fresh weight file) or a
/// single `.mlmodel` protobuf file. Both are written atomically: into a temporary sibling
/// first, synced, then renamed into place, so a reader never sees a half-written model.
public enum ModelWriter {
    /// How the program refers to the weight file of a written package.
    public static let packageWeightReference = "@model_path/weights/weight.bin"

    /// Choices of `writePackage`.
    public struct PackageOptions {
        /// Store large immediate tensors in `weight.bin` as coremltools 9 does (facts §5.6): at
        /// least 10 elements of fp16/fp32/int8/uint8/sub-byte, plus int16/uint16/int32/uint32
        /// for specification version 9+, where coremltools applies the rule (a `const`'s `val`,
        /// iOS16 constexpr parameters, inline constexpr operands). Passes create such
        /// immediates (folded constants, transposed compressed weights); coremltools' own files
        /// never hold them inline. Off: immediates stay inline, exactly as in the IR.
        public var largeImmediatesAsBlobs = true
        /// Replace whatever is at the output path, even a folder that is not a package forge-ir
        /// recognises (see ``OutputSafety``). Off: such a folder is refused.
        public var force = false
        public init(largeImmediatesAsBlobs: Bool = true, force: Bool = false) {
            self.largeImmediatesAsBlobs = largeImmediatesAsBlobs
            self.force = force
        }
    }

    /// Writes `model` as an `.mlpackage` folder at `path`.
    ///
    /// Layout (as coremltools 9 writes it):
    /// - `Manifest.json`: `fileFormatVersion` "1.0.0", two `itemInfoEntries` keyed by fresh
    ///   lowercase UUIDs (`com.apple.CoreML/model.mlmodel`, the root, and
    ///   `com.apple.CoreML/weights`), `rootModelIdentifier`; 4-space indented JSON.
    /// - `Data/com.apple.CoreML/model.mlmodel`: the serialized specification.
    /// - `Data/com.apple.CoreML/weights/`: holds `weight.bin` when the program references blobs
    ///   (coremltools writes the folder even when it stays empty, and so does this).
    ///
    /// `weight.bin` is a fresh MIL blob storage v2 file holding every blob payload the program
    /// references (const values, constexpr attributes and inline operands, nested anywhere),
    /// copied in chunks from the source weight files, each distinct (source file, offset)
    /// once; then (`options.largeImmediatesAsBlobs`, the default) the large immediate
    /// tensors coremltools would store there, identical payloads once. In the written spec
    /// every such reference names `@model_path/weights/weight.bin` and its new offset; `model`
    /// itself is not modified. Writing over the package the model
    /// was loaded from is supported (the sources stay mapped until the model is released).
    ///
    /// The package is built in `<path>.tmp-<random>` next to `path`, fsynced, then renamed to
    /// `path`. An existing package at `path` is replaced (renamed aside, then deleted).
    ///
    /// - Throws: `ModelError.writeFailed(path:reason:)` when the parent folder of `path` does
    ///   not exist, `path` exists but is not an `.mlpackage` folder (or an empty folder), a blob
    ///   is not backed by a loaded weight file, a string holds a NUL character, a dimension is
    ///   negative, or any file operation fails. Nothing is left behind on failure.
    /// - Returns: true when an existing package was replaced.
    @discardableResult
    public static func writePackage(_ model: Model, to path: String, options: PackageOptions = PackageOptions()) throws -> Bool {
        let dest = normalize(path)
        do {
            let parent = try checkParent(of: dest)
            OutputSafety.cleanStaleTemporaries(of: dest)
            var st = stat()
            let replacing = lstat(dest, &st) == 0
            if !options.force { try checkReplaceable(dest, expectPackage: true) }
            let plan = try BlobPlan.make(for: model, immediatesAsBlobs: options.largeImmediatesAsBlobs)
            let spec = try SpecEncoder(model: model, blobOffsets: plan.offsets, blobFileName: packageWeightReference,
                                       immediateOffsets: plan.immediateOffsets).serialize()

            let tmp = dest + ".tmp-" + randomSuffix()
            OutputSafety.track(tmp, dest: dest)
            defer { OutputSafety.untrack(tmp) }
            do {
                try PosixIO.makeDirectory(tmp)
                let data = tmp + "/Data"
                let coreml = data + "/com.apple.CoreML"
                let weights = coreml + "/weights"
                try PosixIO.makeDirectory(data)
                try PosixIO.makeDirectory(coreml)
                try PosixIO.makeDirectory(weights)
                try PosixIO.createFile(coreml + "/model.mlmodel", spec)
                if !plan.isEmpty {
                    try BlobFileWriter.write(plan, to: weights + "/weight.bin")
                }
                try PosixIO.createFile(tmp + "/Manifest.json", Array(manifestJSON().utf8))
                for dir in [weights, coreml, data, tmp] { try PosixIO.syncDirectory(dir) }
                try moveIntoPlace(tmp, dest, parent: parent)
            } catch {
                removeTree(tmp)
                throw error
            }
            return replacing
        } catch {
            throw wrap(error, path)
        }
    }

    /// Writes `model` as a single `.mlmodel` protobuf file at `path` (temporary sibling file,
    /// fsync, rename; an existing file is replaced).
    ///
    /// - Throws: `ModelError.writeFailed(path:reason:)` when the program references weight
    ///   blobs (they need an `.mlpackage`: use `writePackage`), the parent folder does not
    ///   exist, `path` is a folder, the model cannot be encoded, or a file operation fails.
    public static func writeSpecFile(_ model: Model, to path: String) throws {
        let dest = normalize(path)
        do {
            let parent = try checkParent(of: dest)
            try checkReplaceable(dest, expectPackage: false)
            var firstBlob: String?
            BlobWalker.forEachBlob(in: model.program) { _, _, ctx in
                if firstBlob == nil { firstBlob = ctx }
            }
            if let ctx = firstBlob {
                throw WriterFailure("the program references weight blobs (first: \(ctx)); a model with weights must be written as an .mlpackage")
            }
            let spec = try serializeSpec(model)
            let tmp = dest + ".tmp-" + randomSuffix()
            do {
                try PosixIO.createFile(tmp, spec)
                guard rename(tmp, dest) == 0 else {
                    throw WriterFailure("cannot rename \(tmp) to \(dest): \(PosixIO.errnoText())")
                }
                try PosixIO.syncDirectory(parent)
            } catch {
                unlink(tmp)
                throw error
            }
        } catch {
            throw wrap(error, path)
        }
    }

    /// The serialized `model.mlmodel` bytes (a `CoreML.Specification.Model` protobuf whose
    /// `mlProgram` is `model.program`).
    ///
    /// - Parameters:
    ///   - blobOffsets: blob references whose `BlobKey` is in this map are written as
    ///     (`blobFileName`, the mapped offset); all others keep their own file name and offset.
    ///   - blobFileName: the file name used for rewritten references.
    /// - Throws: `ModelError.writeFailed(path: "model.mlmodel", reason:)` when a string holds
    ///   a NUL character or a dimension is negative.
    public static func serializeSpec(_ model: Model, blobOffsets: [BlobKey: UInt64] = [:],
                                     blobFileName: String = packageWeightReference) throws -> [UInt8] {
        do {
            return try SpecEncoder(model: model, blobOffsets: blobOffsets, blobFileName: blobFileName).serialize()
        } catch {
            throw wrap(error, "model.mlmodel")
        }
    }

    /// The new metadata-record offset of every distinct blob of `model` in the `weight.bin`
    /// that `writePackage` would write (first-use order, deduplicated by `BlobKey`).
    /// - Throws: `ModelError.writeFailed` when a blob is not backed by a loaded weight file.
    public static func blobLayout(_ model: Model) throws -> [BlobKey: UInt64] {
        do { return try BlobPlan.make(for: model).offsets } catch { throw wrap(error, "weight.bin") }
    }

    // MARK: Manifest

    static let specPath = "com.apple.CoreML/model.mlmodel"
    static let weightsPath = "com.apple.CoreML/weights"

    /// `Manifest.json` text in coremltools' formatting (sorted keys, 4-space indent, final newline).
    static func manifestJSON() -> String {
        let specID = UUID().uuidString.lowercased()
        let weightsID = UUID().uuidString.lowercased()
        var items: [(String, String)] = [
            (specID, item(description: "CoreML Model Specification", name: "model.mlmodel", path: specPath)),
            (weightsID, item(description: "CoreML Model Weights", name: "weights", path: weightsPath)),
        ]
        items.sort { $0.0 < $1.0 }
        var s = "{\n    \"fileFormatVersion\": \"1.0.0\",\n    \"itemInfoEntries\": {\n"
        s += items.map { "        \"\($0.0)\": \($0.1)" }.joined(separator: ",\n")
        s += "\n    },\n    \"rootModelIdentifier\": \"\(specID)\"\n}\n"
        return s
    }

    private static func item(description: String, name: String, path: String) -> String {
        "{\n            \"author\": \"com.apple.CoreML\",\n            \"description\": \"\(description)\",\n"
            + "            \"name\": \"\(name)\",\n            \"path\": \"\(path)\"\n        }"
    }

    // MARK: File system

    private static func normalize(_ path: String) -> String {
        var p = path
        while p.count > 1 && p.hasSuffix("/") { p.removeLast() }
        return p
    }

    private static func randomSuffix() -> String {
        String(UInt64.random(in: 0...UInt64.max), radix: 36)
    }

    /// The parent folder of `dest`; it must exist.
    private static func checkParent(of dest: String) throws -> String {
        guard !dest.isEmpty else { throw WriterFailure("empty path") }
        var parent = (dest as NSString).deletingLastPathComponent
        if parent.isEmpty { parent = "." }
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: parent, isDirectory: &isDir) else {
            throw WriterFailure("the parent folder \(parent) does not exist")
        }
        guard isDir.boolValue else { throw WriterFailure("\(parent) is not a folder") }
        return parent
    }

    /// Refuses to replace something that is not what we write (guards against deleting an
    /// unrelated folder by mistake).
    private static func checkReplaceable(_ dest: String, expectPackage: Bool) throws {
        var st = stat()
        guard lstat(dest, &st) == 0 else { return }
        let isDir = (st.st_mode & S_IFMT) == S_IFDIR
        if expectPackage {
            guard isDir else { throw WriterFailure("it exists and is not a folder; refusing to replace it with a package") }
            if let why = OutputSafety.unrecognisedPackageReason(dest) {
                throw WriterFailure("it exists and is not a package forge-ir recognises (\(why)); refusing to replace it (--force replaces it anyway)")
            }
        } else if isDir {
            throw WriterFailure("it is a folder; refusing to replace it with a .mlmodel file")
        }
    }

    /// Renames `tmp` to `dest`, replacing an existing `dest` (renamed aside, then deleted).
    private static func moveIntoPlace(_ tmp: String, _ dest: String, parent: String) throws {
        var st = stat()
        if lstat(dest, &st) == 0 {
            let old = dest + ".old-" + randomSuffix()
            guard rename(dest, old) == 0 else {
                throw WriterFailure("cannot move the existing \(dest) aside: \(PosixIO.errnoText())")
            }
            guard rename(tmp, dest) == 0 else {
                let e = errno
                _ = rename(old, dest)
                throw WriterFailure("cannot rename \(tmp) to \(dest): \(PosixIO.errnoText(e))")
            }
            try? PosixIO.syncDirectory(parent)
            removeTree(old)
        } else {
            guard rename(tmp, dest) == 0 else {
                throw WriterFailure("cannot rename \(tmp) to \(dest): \(PosixIO.errnoText())")
            }
        }
        try PosixIO.syncDirectory(parent)
    }

    private static func removeTree(_ path: String) {
        try? FileManager.default.removeItem(atPath: path)
    }

    private static func wrap(_ error: Error, _ path: String) -> ModelError {
        switch error {
        case let e as ModelError:
            if case .writeFailed = e { return e }
            return .writeFailed(path: path, reason: e.description)
        case let e as WriterFailure:
            return .writeFailed(path: path, reason: e.reason)
        default:
            return .writeFailed(path: path, reason: FileErrorText.text(error))
        }
    }
}
