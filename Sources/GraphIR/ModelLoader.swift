import CoreMLProto
import Foundation
import JSON

/// Loads Core ML ML Program models into the IR.
///
/// Accepts an `.mlpackage` folder (its `Manifest.json` names the root model; blobs resolve
/// `@model_path` to the folder holding `model.mlmodel`), a single `.mlmodel` protobuf file
/// (blobs then resolve next to the file), or a compiled `.mlmodelc` folder (`model.mil` text
/// plus `coremldata.bin` / `metadata.json`, see `CompiledModelLoader`; blobs resolve in the
/// folder). Weight files are memory-mapped, never read whole;
/// each blob's 64-byte record is checked (sentinel, dtype, bounds) at load time.
public enum ModelLoader {
    /// Largest `model.mlmodel` accepted (the protobuf is read into memory; weights are not).
    public static let maxSpecBytes = 2 << 30

    /// Loads the model at `path`, then runs the verifier on every function.
    /// - Throws: `ModelError` — `.fileNotFound`, `.unsupportedFormat`, `.badManifest`,
    ///   `.malformedProtobuf`, `.notMLProgram`, `.missingWeightFile`, `.badWeightFile`,
    ///   `.badBlob`, `.unknownDType`, `.invalidProgram` — each naming the file; for a
    ///   `.mlmodelc`, `MILTextError` (file, line, column) when `model.mil` does not parse.
    public static func load(path: String) throws -> Model {
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDir) else {
            throw ModelError.fileNotFound(path: path)
        }
        if !isDir.boolValue {
            do { try SafeFile.requireRegular(path) } catch let f as SafeFile.Failure {
                throw ModelError.unsupportedFormat(path: path, reason: "the model \(f.reason)")
            }
        }
        let specPath: String
        if isDir.boolValue {
            if FileManager.default.fileExists(atPath: path + "/Manifest.json") {
                specPath = try rootSpecPath(package: path)
            } else if FileManager.default.fileExists(atPath: path + "/model.mil") {
                let model = try CompiledModelLoader.load(path: path)
                try Verifier.verify(model, path: path + "/model.mil")
                return model
            } else if FileManager.default.fileExists(atPath: path + "/model0") {
                throw ModelError.unsupportedFormat(path: path, reason: "a compiled pipeline (model0/, model1/, …): forge-ir's IR holds one ML Program, not a pipeline; load one stage, e.g. \(path)/model0")
            } else if path.hasSuffix(".mlmodelc") || path.hasSuffix(".mlmodelc/") {
                throw ModelError.unsupportedFormat(path: path, reason: "a compiled model without model.mil (not an ML Program: neural-network models compile to model.espresso.* files, which forge-ir does not read)")
            } else {
                throw ModelError.unsupportedFormat(path: path, reason: "a folder without Manifest.json is not an .mlpackage")
            }
        } else {
            specPath = path
        }
        let model = try loadSpec(specPath: specPath)
        model.sourcePath = path
        try Verifier.verify(model, path: specPath)
        return model
    }

    /// The `model.mlmodel` path named by a package's `Manifest.json`.
    static func rootSpecPath(package: String) throws -> String {
        let manifestPath = package + "/Manifest.json"
        let data: Data
        do { data = try SafeFile.read(manifestPath, limit: 16 << 20) } catch let f as SafeFile.Failure {
            throw ModelError.badManifest(path: manifestPath, reason: f.reason)
        }
        let parsed: JSONValue
        do { parsed = try JSONValue.parse(bytes: data) } catch let e as JSONValue.ParseError {
            throw ModelError.badManifest(path: manifestPath, reason: "not valid JSON: line \(e.line) (byte \(e.offset)): \(e.reason)")
        }
        guard let json = parsed.objectValue else {
            throw ModelError.badManifest(path: manifestPath, reason: "not a JSON object")
        }
        guard let root = json["rootModelIdentifier"]?.stringValue else {
            throw ModelError.badManifest(path: manifestPath, reason: "no rootModelIdentifier")
        }
        guard let entries = json["itemInfoEntries"]?.objectValue,
              let entry = (entries[root] ?? entries[root.uppercased()] ?? entries[root.lowercased()])?.objectValue,
              let rel = entry["path"]?.stringValue else {
            throw ModelError.badManifest(path: manifestPath, reason: "itemInfoEntries has no path for root model '\(root)'")
        }
        guard !rel.split(separator: "/").contains(".."), !rel.hasPrefix("/") else {
            throw ModelError.badManifest(path: manifestPath, reason: "root model path '\(rel)' leaves the package")
        }
        let spec = package + "/Data/" + rel
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: spec, isDirectory: &isDir), !isDir.boolValue else {
            throw ModelError.badManifest(path: manifestPath, reason: "root model file Data/\(rel) does not exist")
        }
        return spec
    }

    /// Decodes one `model.mlmodel` protobuf file.
    static func loadSpec(specPath: String) throws -> Model {
        let data: Data
        do {
            data = try SafeFile.read(specPath, limit: min(maxSpecBytes, MemoryBudget.limit))
        } catch let f as SafeFile.Failure {
            if case .missing = f { throw ModelError.fileNotFound(path: specPath) }
            throw ModelError.unsupportedFormat(path: specPath, reason: "the model specification \(f.reason)")
        }
        guard !data.isEmpty else { throw ModelError.malformedProtobuf(path: specPath) }
        let modelDir = (specPath as NSString).deletingLastPathComponent
        return try data.withUnsafeBytes { raw -> Model in
            // protobuf-c recurses per nested message: bound the nesting before it unpacks.
            guard !WireScan.exceedsDepth(raw) else {
                throw ModelError.nestingTooDeep(path: specPath, limit: WireScan.maxDepth)
            }
            guard let base = raw.baseAddress?.assumingMemoryBound(to: UInt8.self),
                  let msg = core_ml__specification__model__unpack(nil, raw.count, base) else {
                throw ModelError.malformedProtobuf(path: specPath)
            }
            defer { core_ml__specification__model__free_unpacked(msg, nil) }
            var decoder = ProtoDecoder(specPath: specPath, modelDir: modelDir.isEmpty ? "." : modelDir)
            return try decoder.model(msg)
        }
    }
}
