import GraphIR
import JSON

/// A shape a finding names — the operand, its dtype and its dimensions — in one format for
/// every check of `diagnose`:
///
/// - text, as MIL text writes a type, with the flexible dimensions by their diagnose symbol
///   (`?` when nothing is known): `x tensor<fp16, [1, inputIds_1, 128]>`; the contents of a small
///   integer tensor after `=` (`begin tensor<int32, [5]> = [0, 0, 0, -63, 0]`); a flexibility
///   declaration after the type (`inputIds tensor<int32, [1, ?]> RangeDim(1..64)`);
/// - JSON: `{"name": "x", "dtype": "fp16", "shape": [1, null, 128], "text": "tensor<…>"}`, null
///   for a symbolic or unknown dimension (`shape` null: rank unknown), plus `"value"` and
///   `"flexibility"` when the text has them.
public struct ShapeNote: Sendable, Equatable {
    public enum Dim: Sendable, Equatable {
        case fixed(Int)
        /// Known only by a symbol or an expression of symbols (`inputIds_1`, `causalMask_3 - 1`).
        case symbolic(String)
        case unknown

        public var fixed: Int? { if case let .fixed(v) = self { return v } else { return nil } }
        public var text: String {
            switch self {
            case let .fixed(v): return String(v)
            case let .symbolic(s): return s
            case .unknown: return "?"
            }
        }
        public init(_ e: DimExpr) { self = e.constant.map { .fixed($0) } ?? .symbolic(e.description) }
        public init(_ d: GraphIR.Dim) {
            switch d {
            case let .fixed(v): self = .fixed(v)
            case let .symbol(s): self = s.name.isEmpty ? .unknown : .symbolic(s.name)
            case .unknown, .variadic: self = .unknown
            }
        }
    }

    /// The operand (`x`, `update`, `output`) or the input / state name.
    public var name: String
    /// MIL dtype name (`fp16`, `int32`); nil when not known.
    public var dtype: String?
    /// nil: rank unknown.
    public var dims: [Dim]?
    /// The contents of a small integer tensor, when they are what matters (slice bounds).
    public var value: [Dim]?
    /// How an input is declared flexible (`RangeDim(1..64)`, `Enumerated([1, 1] | [1, 16])`, `fixed`).
    public var flexibility: String?

    public init(_ name: String, dtype: DType?, dims: [Dim]?, value: [Dim]? = nil, flexibility: String? = nil) {
        self.name = name
        self.dtype = dtype?.rawValue
        self.dims = dims
        self.value = value
        self.flexibility = flexibility
    }

    /// A declared MIL type (a state: its wrapped tensor).
    public init(_ name: String, _ type: MILType) {
        if let t = type.tensorType ?? type.stateWrappedTensor {
            self.init(name, t)
        } else {
            self.init(name, dtype: nil, dims: nil)
        }
    }

    public init(_ name: String, _ t: TensorType) {
        self.init(name, dtype: t.dtype, dims: t.shape.map(Dim.init))
    }

    /// An inferred type (symbolic dimensions by their expression).
    public init(_ name: String, _ t: SymTensor) {
        self.init(name, dtype: t.dtype, dims: t.shape?.map(Dim.init))
    }

    /// A shape seen at run time.
    public init(_ name: String, dtype: DType?, shape: [Int]) {
        self.init(name, dtype: dtype, dims: shape.map { .fixed($0) })
    }

    /// An input as the model description declares it: its shape (flexible axes unknown) and
    /// its flexibility.
    public init(_ name: String, feature: FeatureDescription) {
        guard let a = feature.array else {
            self.init(name, dtype: nil, dims: nil)
            return
        }
        var dims = a.shape.map { Dim.fixed($0) }
        var flex = "fixed"
        switch a.flexibility {
        case .none: break
        case let .range(ranges):
            for (i, r) in ranges.enumerated() where i < dims.count && !r.isFixed { dims[i] = .unknown }
            if !ranges.allSatisfy(\.isFixed) {
                flex = ranges.filter { !$0.isFixed }.map { "RangeDim(\($0.lower)..\($0.upper.map(String.init) ?? "inf"))" }.joined(separator: ", ")
            }
        case let .enumerated(shapes):
            if let first = shapes.first {
                for i in dims.indices where shapes.contains(where: { i < $0.count && i < first.count && $0[i] != first[i] }) { dims[i] = .unknown }
            }
            flex = "Enumerated(" + shapes.map { "\($0)" }.joined(separator: " | ") + ")"
        }
        self.init(name, dtype: a.dataType?.dtype, dims: dims, flexibility: flex)
    }

    /// `tensor<fp16, [1, inputIds_1, 128]>` (+ ` = [values]`, + ` flexibility`).
    public var typeText: String {
        let shape = dims.map { "[" + $0.map(\.text).joined(separator: ", ") + "]" } ?? "[?rank]"
        var s = "tensor<\(dtype ?? "?"), \(shape)>"
        if let value { s += " = [" + value.map(\.text).joined(separator: ", ") + "]" }
        if let flexibility { s += " " + flexibility }
        return s
    }

    /// `name tensor<…>`.
    public var text: String { "\(name) \(typeText)" }

    public var json: JSONValue {
        func dims(_ d: [Dim]) -> JSONValue { .array(d.map { $0.fixed.map { .int($0) } ?? .null }) }
        var o: [String: JSONValue] = [
            "name": .string(name),
            "dtype": dtype.map { .string($0) } ?? .null,
            "shape": self.dims.map(dims) ?? .null,
            "text": .string(typeText),
        ]
        if let value { o["value"] = dims(value) }
        if let flexibility { o["flexibility"] = .string(flexibility) }
        return .object(o)
    }
}

extension ShapeNote {
    /// The shapes of a shape-inference issue, with the dtypes of the op's operands (`output`:
    /// its first output).
    static func notes(_ issue: ShapeIssue, in f: Function) -> [ShapeNote] {
        var op: Op?
        var i = 0
        f.body.walk { o in
            if i == issue.opIndex, o.name == issue.opName { op = o }
            i += 1
        }
        return issue.shapes.map { entry in
            if let declared = entry.shape.declared { return ShapeNote(entry.name, declared) }
            let type: MILType? = entry.name == "output" ? op?.outputs.first?.type : op?.operand(entry.name)?.type
            let dtype = type?.tensorType?.dtype ?? type?.stateWrappedTensor?.dtype
            let dims = entry.shape.dims?.map(Dim.init)
            if entry.shape.isValue, let d = dims {
                return ShapeNote(entry.name, dtype: dtype, dims: [.fixed(d.count)], value: d)
            }
            return ShapeNote(entry.name, dtype: dtype, dims: dims)
        }
    }
}
