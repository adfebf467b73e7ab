import Foundation

/// Loads a compiled Core ML model folder (`Foo.mlmodelc`) into the same IR as its `.mlpackage`.
///
/// Layout read (facts sheet §10): `model.mil` (MIL text, parsed by `MILTextParser`; every
/// `BLOBFILE` resolves `@model_path` to the `.mlmodelc` folder and its weight file —
/// whatever name the text references — is memory-mapped and checked as in a package);
/// `coremldata.bin` (binary description, see `CoreMLDataBin`); `metadata.json`
/// (`CompiledMetadataJSON`). `analytics/coremldata.bin` is not read.
///
/// The description comes from the first readable of: `coremldata.bin`, `metadata.json`, the
/// function signatures (`SignatureDescription`). The others are cross-checked against it —
/// schemas of `metadata.json`, each function's `FlexibleShapeInformation`, the op histogram
/// — and every disagreement or unreadable part becomes a note in `Model.compiled`.
/// The compiler-added `FlexibleShapeInformation` function attribute is taken out of
/// `Function.attributes` (a package has none; its content is in the description), and flexible
/// input dims get their symbols as the package loader gives them.
enum CompiledModelLoader {
    /// Largest `model.mil` accepted (read into memory; weights are mapped, not read).
    static let maxTextBytes = 2 << 30

    static func load(path: String) throws -> Model {
        let milPath = path + "/model.mil"
        guard let handle = FileHandle(forReadingAtPath: milPath) else { throw ModelError.fileNotFound(path: milPath) }
        let size = (try? handle.seekToEnd()).map(Int.init) ?? 0
        guard size <= maxTextBytes else {
            try? handle.close()
            throw ModelError.unsupportedFormat(path: milPath, reason: "MIL text is \(size) bytes, more than the \(maxTextBytes)-byte limit")
        }
        try? handle.seek(toOffset: 0)
        let bytes = [UInt8]((try? handle.readToEnd()) ?? Data())
        try? handle.close()
        let parsed = try MILTextParser.parse(bytes: bytes, file: milPath, modelDirectory: path)
        let program = parsed.program
        var notes: [String] = []

        let flexible = takeFlexibleShapeInformation(program, notes: &notes)

        var bin: CoreMLDataBin?
        do { bin = try CoreMLDataBin(path: path + "/coremldata.bin") } catch { notes.append("\(error)") }
        var meta: CompiledMetadataJSON?
        do { meta = try CompiledMetadataJSON(path: path + "/metadata.json") } catch { notes.append("\(error)") }

        let description: ModelDescription
        let source: CompiledModelInfo.DescriptionSource
        if let bin {
            description = bin.description
            source = .coremldataBin
            notes += bin.notes
        } else if let meta {
            description = meta.description
            source = .metadataJSON
            notes.append("metadata.json gives no model metadata beyond author, license, description, version and user-defined keys")
        } else {
            description = SignatureDescription.build(program, flexible: flexible, notes: &notes)
            source = .functionSignatures
            notes.append("description rebuilt from the function signatures: metadata, feature descriptions and optional flags are unknown")
        }
        if let meta {
            notes += meta.notes
            if source != .metadataJSON { notes += crossCheck(description, meta.description, "metadata.json") }
        }
        bindFlexibleDims(program, description)
        for f in program.functions {
            let iface = description.interface(of: f.name)
            if let fsi = flexible[f.name] { notes += crossCheck(iface, fsi, function: f.name) }
            for feature in iface.inputs where !f.inputs.contains(where: { $0.name == feature.name }) {
                notes.append("function '\(f.name)': described input '\(feature.name)' is not in its signature")
            }
        }
        if let histogram = meta?.operationHistogram { notes += crossCheck(program, histogram) }

        let specVersion: Int32
        let specSource: String
        if let v = bin?.specificationVersion {
            specVersion = v
            specSource = "coremldata.bin"
            if let m = meta?.specificationVersion, m != v { notes.append("metadata.json says specification version \(m), coremldata.bin \(v)") }
        } else if let v = meta?.specificationVersion {
            specVersion = v
            specSource = "metadata.json"
        } else {
            let versions = program.functions.compactMap { f in Opset.table.first { $0.proto == f.opset }?.specVersion }
            specVersion = Int32(versions.max() ?? 9)
            specSource = "opset"
        }
        let model = Model(specificationVersion: specVersion, description: description, isUpdatable: meta?.isUpdatable ?? false,
                          program: program, sourcePath: path, weightFiles: parsed.weightFiles)
        model.compiled = CompiledModelInfo(descriptionSource: source, specificationVersionSource: specSource,
                                           milVersion: parsed.headerVersion, notes: notes)
        return model
    }

    /// Takes the compiler's `FlexibleShapeInformation` out of every function's attributes
    /// (a package has none) and returns it decoded, by function name.
    static func takeFlexibleShapeInformation(_ program: Program, notes: inout [String]) -> [String: FlexibleShapeInformation] {
        var flexible: [String: FlexibleShapeInformation] = [:]
        for f in program.functions {
            guard let i = f.attributes.firstIndex(where: { $0.name == "FlexibleShapeInformation" }) else { continue }
            do { flexible[f.name] = try FlexibleShapeInformation(f.attributes[i].value) } catch {
                notes.append("function '\(f.name)': FlexibleShapeInformation not understood (\(error))")
            }
            f.attributes.remove(at: i)
        }
        return flexible
    }

    /// Gives flexible function inputs the dim symbols the package loader gives them.
    static func bindFlexibleDims(_ program: Program, _ description: ModelDescription) {
        for f in program.functions {
            let iface = description.interface(of: f.name)
            for v in f.inputs {
                v.type = ProtoDecoder.bindFlexibleDims(v.type, input: v.name, interface: iface)
            }
        }
    }

    // MARK: - cross-checks

    static func crossCheck(_ a: ModelDescription, _ b: ModelDescription, _ other: String) -> [String] {
        var out: [String] = []
        let names = Set(a.functions.map(\.name) + b.functions.map(\.name))
        let interfaces: [(String, FunctionDescription, FunctionDescription)] = names.isEmpty
            ? [("", a.interface(of: ""), b.interface(of: ""))]
            : names.sorted().map { ($0, a.interface(of: $0), b.interface(of: $0)) }
        for (fname, x, y) in interfaces {
            let ctx = fname.isEmpty ? "" : "function '\(fname)' "
            for (what, p, q) in [("input", x.inputs, y.inputs), ("output", x.outputs, y.outputs), ("state", x.states, y.states)] {
                if p.map(\.name) != q.map(\.name) {
                    out.append("\(other) lists \(ctx)\(what)s \(q.map(\.name)), the description \(p.map(\.name))")
                    continue
                }
                for (f, g) in zip(p, q) where f.kind != g.kind {
                    out.append("\(other) describes \(ctx)\(what) '\(f.name)' differently (\(summary(g.kind)) vs \(summary(f.kind)))")
                }
            }
        }
        return out
    }

    static func summary(_ k: FeatureKind) -> String {
        switch k {
        case let .multiArray(a), let .state(a):
            return "\(a.dataType?.dtype.rawValue ?? "?") \(a.shape) \(a.flexibility)"
        default:
            return "\(k)"
        }
    }

    static func crossCheck(_ iface: FunctionDescription, _ fsi: FlexibleShapeInformation, function: String) -> [String] {
        var out: [String] = []
        for (name, info) in fsi.inputs {
            guard let a = iface.inputs.first(where: { $0.name == name })?.array else {
                out.append("function '\(function)': FlexibleShapeInformation names '\(name)', which the description does not list")
                continue
            }
            if let d = info.defaultShape, d != a.shape {
                out.append("function '\(function)' input '\(name)': FlexibleShapeInformation default \(d), description \(a.shape)")
            }
            var same = info.flexibility == a.flexibility
            if case let .enumerated(x) = info.flexibility, case let .enumerated(y) = a.flexibility { same = Set(x) == Set(y) }
            if !same {
                out.append("function '\(function)' input '\(name)': FlexibleShapeInformation \(info.flexibility), description \(a.flexibility)")
            }
        }
        return out
    }

    /// Our op counts (const excluded, nested blocks included) against the histogram. Names are
    /// compared without underscores and case (`range_1d` is `range1d` in camelCase, and the
    /// camelCase spelling cannot say where a digit run starts).
    static func crossCheck(_ program: Program, _ histogram: [String: Int]) -> [String] {
        func key(_ s: String) -> String { s.replacingOccurrences(of: "_", with: "").lowercased() }
        var counts: [String: Int] = [:]
        var spelled: [String: String] = [:]
        for f in program.functions {
            f.body.walk { op in
                if op.type != "const" { counts[key(op.type), default: 0] += 1; spelled[key(op.type)] = op.type }
            }
        }
        var theirs: [String: Int] = [:]
        for (k, v) in histogram {
            theirs[key(k), default: 0] += v
            if spelled[key(k)] == nil { spelled[key(k)] = k }
        }
        let histogram = theirs
        var diffs: [String] = []
        for k in Set(counts.keys).union(histogram.keys).sorted() where counts[k, default: 0] != histogram[k, default: 0] {
            diffs.append("\(spelled[k] ?? k) \(counts[k, default: 0]) vs \(histogram[k, default: 0])")
        }
        if diffs.isEmpty { return [] }
        return ["mlProgramOperationTypeHistogram disagrees with model.mil (ours vs histogram): " + diffs.joined(separator: ", ")]
    }
}
