/// A loaded Core ML ML Program model: specification version, description and program.
public final class Model {
    public var specificationVersion: Int32
    public var description: ModelDescription
    public var isUpdatable: Bool
    public var program: Program
    /// Where it was loaded from (nil when built in memory).
    public var sourcePath: String?
    /// Mapped weight files, keyed by their resolved file-system path.
    public var weightFiles: [String: WeightFile]
    /// Set when the model was loaded from a compiled `.mlmodelc` folder: where its
    /// description came from and what was unknown.
    public var compiled: CompiledModelInfo?

    public init(specificationVersion: Int32, description: ModelDescription, isUpdatable: Bool = false, program: Program, sourcePath: String? = nil, weightFiles: [String: WeightFile] = [:]) {
        self.specificationVersion = specificationVersion
        self.description = description
        self.isUpdatable = isUpdatable
        self.program = program
        self.sourcePath = sourcePath
        self.weightFiles = weightFiles
    }

    /// The function run when none is named: `defaultFunctionName`, else `main`, else the only one.
    public var defaultFunction: Function? {
        let name = description.defaultFunctionName
        if !name.isEmpty, let f = program.function(named: name) { return f }
        if let f = program.function(named: "main") { return f }
        return program.functions.count == 1 ? program.functions[0] : nil
    }

    public var defaultFunctionName: String {
        if !description.defaultFunctionName.isEmpty { return description.defaultFunctionName }
        return defaultFunction?.name ?? "main"
    }
}
