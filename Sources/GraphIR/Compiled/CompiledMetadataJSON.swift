import Foundation
import JSON

/// The `metadata.json` of a compiled `.mlmodelc`: a JSON array holding one object whose values
/// are mostly strings (facts sheet §10, keys seen in real compiled models).
///
/// Read: `specificationVersion`; `inputSchema`, `outputSchema`, `stateSchema` (per feature
/// `name`, `type` — `MultiArray` / `State` / `Int64` / `Double` / `String` —, `dataType`
/// `Float32`/`Float16`/`Double`/`Int32`/`Int8`, `shape` `"[1, 8]"`, `isOptional` `"0"|"1"`,
/// `hasShapeFlexibility`, `shapeRange` `"[[1, 1], [1, 2048]]"`, `enumeratedShapes`
/// `"[[1, 64], [1, 128]]"`, `shortDescription`); `functions` (per function `name` and the
/// three schemas) with `defaultFunctionName`; `mlProgramOperationTypeHistogram`
/// (`"Ios18.sliceUpdate": 2`, const ops not counted); `author`, `license`,
/// `shortDescription`, `version`, `userDefinedMetadata`. `functions`/`defaultFunctionName`
/// are our assumption for multi-function models (no public sample was found).
public struct CompiledMetadataJSON {
    public var specificationVersion: Int32?
    public var description: ModelDescription
    /// Op type (MIL spelling, e.g. `slice_update`) → count, from the histogram.
    public var operationHistogram: [String: Int]?
    /// `isUpdatable` (`"1"`).
    public var isUpdatable = false
    public var notes: [String] = []

    public struct Unreadable: Error, CustomStringConvertible {
        public var description: String
    }

    /// Largest file read.
    public static let maxBytes = 64 << 20

    /// - Throws: `Unreadable` when the file is missing, too large, or not a JSON array/object
    ///   with at least one schema.
    public init(path: String) throws {
        guard let attrs = try? FileManager.default.attributesOfItem(atPath: path) else { throw Unreadable(description: "no metadata.json") }
        let size = (attrs[.size] as? NSNumber)?.intValue ?? 0
        guard size <= Self.maxBytes else { throw Unreadable(description: "metadata.json is \(size) bytes, more than the \(Self.maxBytes)-byte limit") }
        guard let data = FileManager.default.contents(atPath: path) else { throw Unreadable(description: "cannot read metadata.json") }
        try self.init(data: data)
    }

    public init(data: Data) throws {
        let json = try? JSONValue.parse(bytes: data)
        guard let root = json?.arrayValue?.first?.objectValue ?? json?.objectValue else {
            throw Unreadable(description: "metadata.json is not an array holding an object")
        }
        var d = ModelDescription()
        var notes: [String] = []
        func schema(_ key: String, in o: JSONObject, context: String) -> [FeatureDescription] {
            guard let list = o[key]?.arrayValue?.compactMap(\.objectValue) else { return [] }
            return list.compactMap { f in
                do { return try Self.feature(f, state: key == "stateSchema") } catch {
                    notes.append("metadata.json \(context)\(key): \(error)")
                    return nil
                }
            }
        }
        d.inputs = schema("inputSchema", in: root, context: "")
        d.outputs = schema("outputSchema", in: root, context: "")
        d.states = schema("stateSchema", in: root, context: "")
        if let fs = root["functions"]?.arrayValue?.compactMap(\.objectValue) {
            d.functions = fs.map { f in
                let n = Self.string(f["name"]) ?? ""
                return FunctionDescription(name: n, inputs: schema("inputSchema", in: f, context: "function '\(n)' "),
                                           outputs: schema("outputSchema", in: f, context: "function '\(n)' "),
                                           states: schema("stateSchema", in: f, context: "function '\(n)' "))
            }
        }
        d.defaultFunctionName = Self.string(root["defaultFunctionName"]) ?? ""
        guard root["inputSchema"] != nil || root["outputSchema"] != nil || root["functions"] != nil else {
            throw Unreadable(description: "metadata.json has no inputSchema, outputSchema or functions")
        }
        var meta = ModelMetadata()
        meta.author = Self.string(root["author"]) ?? ""
        meta.license = Self.string(root["license"]) ?? ""
        meta.shortDescription = Self.string(root["shortDescription"]) ?? ""
        meta.versionString = Self.string(root["version"]) ?? Self.string(root["versionString"]) ?? ""
        if let ud = root["userDefinedMetadata"]?.objectValue {
            meta.userDefined = ud.keys.sorted().map { (key: $0, value: Self.string(ud[$0]) ?? "") }
        }
        d.metadata = meta
        description = d
        specificationVersion = (Self.string(root["specificationVersion"])).flatMap { Int32($0) }
        if let h = root["mlProgramOperationTypeHistogram"]?.objectValue {
            var out: [String: Int] = [:]
            for (k, v) in h {
                guard let n = v.intValue ?? Self.string(v).flatMap({ Int($0) }) else { continue }
                out[Self.milOpName(k), default: 0] += n
            }
            operationHistogram = out
        }
        isUpdatable = Self.string(root["isUpdatable"]) == "1"
        self.notes = notes
    }

    /// `Ios17.sliceByIndex` / `SliceByIndex` → `slice_by_index`.
    public static func milOpName(_ key: String) -> String {
        let base = key.split(separator: ".").last.map(String.init) ?? key
        var out = ""
        for (i, c) in base.enumerated() {
            if c.isUppercase {
                if i > 0 { out += "_" }
                out += c.lowercased()
            } else {
                out.append(c)
            }
        }
        return out
    }

    /// A string value, or a number written as the string Core ML would write (`1`, `0.5`).
    static func string(_ v: JSONValue?) -> String? {
        switch v {
        case let .string(s)?: return s
        case let .int(i)?: return String(i)
        case let .double(d)?: return String(d)
        case let .bool(b)?: return b ? "1" : "0"
        default: return nil
        }
    }

    struct Bad: Error, CustomStringConvertible { var description: String }

    /// `"[1, 8]"` → [1, 8]; `"[[1, 1], [1, 2048]]"` → [[1, 1], [1, 2048]].
    static func intLists(_ text: String) -> [[Int]]? {
        guard let rows = (try? JSONValue.parse(text))?.arrayValue else { return nil }
        var out: [[Int]] = []
        for row in rows {
            guard let r = row.arrayValue else { return nil }
            let ints = r.compactMap(\.intValue)
            guard ints.count == r.count else { return nil }
            out.append(ints)
        }
        return out
    }
    static func intList(_ text: String) -> [Int]? {
        guard let r = (try? JSONValue.parse(text))?.arrayValue else { return nil }
        let ints = r.compactMap(\.intValue)
        return ints.count == r.count ? ints : nil
    }

    static func feature(_ f: JSONObject, state: Bool) throws -> FeatureDescription {
        guard let name = string(f["name"]), !name.isEmpty else { throw Bad(description: "a feature without a name") }
        let type = string(f["type"]) ?? (state ? "State" : "MultiArray")
        let optional = string(f["isOptional"]) == "1"
        let short = string(f["shortDescription"]) ?? ""
        switch type {
        case "MultiArray", "State":
            let dataType: ArrayDataType
            switch string(f["dataType"]) ?? "" {
            case "Float32": dataType = .float32
            case "Float16": dataType = .float16
            case "Double", "Float64": dataType = .double
            case "Int32": dataType = .int32
            case "Int8": dataType = .int8
            case let other: throw Bad(description: "feature '\(name)': unknown dataType '\(other)'")
            }
            let shape = string(f["shape"]).flatMap(intList) ?? []
            var flex = ShapeFlexibility.none
            if string(f["hasShapeFlexibility"]) == "1" {
                if let e = string(f["enumeratedShapes"]).flatMap(intLists) {
                    flex = .enumerated(e)
                } else if let r = string(f["shapeRange"]).flatMap(intLists) {
                    flex = .range(r.map { SizeRange(lower: $0.first ?? 0, upper: ($0.count > 1 && $0[1] >= 0) ? $0[1] : nil) })
                }
            }
            let a = ArrayFeature(shape: shape, dataType: dataType, flexibility: flex)
            return FeatureDescription(name: name, shortDescription: short, kind: type == "State" || state ? .state(a) : .multiArray(a), isOptional: optional)
        case "Int64": return FeatureDescription(name: name, shortDescription: short, kind: .int64, isOptional: optional)
        case "Double": return FeatureDescription(name: name, shortDescription: short, kind: .double, isOptional: optional)
        case "String": return FeatureDescription(name: name, shortDescription: short, kind: .string, isOptional: optional)
        default: throw Bad(description: "feature '\(name)': type '\(type)' is not read")
        }
    }
}
