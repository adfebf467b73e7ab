/// Errors from loading, verifying and writing models. Each names the file and, where one is
/// involved, the function, operation or value, and says what was expected.
public enum ModelError: Error, Equatable, CustomStringConvertible {
    /// No file or folder at the path, or an unreadable one.
    case fileNotFound(path: String)
    /// The path is neither an `.mlmodel` file nor an `.mlpackage` folder.
    case unsupportedFormat(path: String, reason: String)
    /// `Manifest.json` is missing or malformed, or does not name the root model.
    case badManifest(path: String, reason: String)
    /// The protobuf could not be decoded (truncated or malformed bytes).
    case malformedProtobuf(path: String)
    /// A valid Core ML model of a kind forge-ir does not read (e.g. `neuralNetwork`).
    case notMLProgram(path: String, kind: String)
    /// The weight file a blob refers to does not exist.
    case missingWeightFile(path: String)
    /// The weight file is not MIL blob storage v2.
    case badWeightFile(path: String, reason: String)
    /// A blob reference points outside the file, at a bad sentinel, or at a record whose
    /// dtype or size does not match the value's type.
    case badBlob(path: String, offset: UInt64, reason: String)
    /// An unknown `DataType` / array data type code.
    case unknownDType(path: String, context: String, code: Int32)
    /// The program is structurally invalid (undefined value, cycle, duplicate definition,
    /// bad type, missing input…). `context` names the function / op / value.
    case invalidProgram(path: String, context: String, reason: String)
    /// Writing failed.
    case writeFailed(path: String, reason: String)
    /// Messages nested deeper than `limit` levels (see ``WireScan``): refused before unpacking.
    case nestingTooDeep(path: String, limit: Int)
    /// An element count or byte size that overflows, or a declared size over the memory budget.
    case sizeOverflow(path: String, context: String, reason: String)

    public var description: String {
        switch self {
        case let .fileNotFound(path): return "\(path): no such file or folder"
        case let .unsupportedFormat(path, reason): return "\(path): unsupported model format: \(reason)"
        case let .badManifest(path, reason): return "\(path): bad Manifest.json: \(reason)"
        case let .malformedProtobuf(path): return "\(path): malformed or truncated protobuf: not a readable Core ML model specification"
        case let .notMLProgram(path, kind):
            let hint = kind.hasPrefix("neuralNetwork") ? "; convert the source model again with coremltools' ct.convert(..., convert_to=\"mlprogram\")" : ""
            return "\(path): model type '\(kind)' is not supported: forge-ir reads ML Program (mlProgram) models only" + hint
        case let .missingWeightFile(path): return "\(path): weight file not found"
        case let .badWeightFile(path, reason): return "\(path): not a valid MIL weight blob file: \(reason)"
        case let .badBlob(path, offset, reason): return "\(path): blob at offset \(offset): \(reason)"
        case let .unknownDType(path, context, code): return "\(path): \(context): unknown data type code \(code)"
        case let .invalidProgram(path, context, reason): return "\(path): \(context): \(reason)"
        case let .writeFailed(path, reason): return "\(path): cannot write: \(reason)"
        case let .nestingTooDeep(path, limit): return "\(path): protobuf messages nested deeper than the limit of \(limit) levels (blocks or types nested thousands deep?); refused before decoding"
        case let .sizeOverflow(path, context, reason): return "\(path): \(context): \(reason)"
        }
    }
}
