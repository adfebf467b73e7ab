/// How a compiled `.mlmodelc` was read (set on `Model.compiled` by the loader).
public struct CompiledModelInfo: Hashable, Sendable {
    /// Where the model description came from.
    public enum DescriptionSource: String, Hashable, Sendable {
        /// The ModelDescription protobuf inside `coremldata.bin`.
        case coremldataBin = "coremldata.bin"
        /// The schemas of `metadata.json`.
        case metadataJSON = "metadata.json"
        /// The MIL function signatures (and their `FlexibleShapeInformation`).
        case functionSignatures = "function signatures"
    }

    public var descriptionSource: DescriptionSource
    /// Where the specification version came from (`coremldata.bin`, `metadata.json`, or
    /// `opset` — the newest function opset).
    public var specificationVersionSource: String
    /// The header version of `model.mil` as written (`1.0`, `1.3`).
    public var milVersion: String
    /// What was unreadable, unknown, or disagreed between the sources, one sentence each.
    public var notes: [String]

    public init(descriptionSource: DescriptionSource, specificationVersionSource: String, milVersion: String, notes: [String]) {
        self.descriptionSource = descriptionSource
        self.specificationVersionSource = specificationVersionSource
        self.milVersion = milVersion
        self.notes = notes
    }
}
