
/// A shape problem found at one op.
public struct ShapeIssue: Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// Shapes that no binding of this kind can satisfy (broadcast, reshape, matmul, concat…).
        case shapeError = "shape_error"
        /// A dimension becomes 0.
        case zeroDimension = "zero_dimension"
        /// An integer derived from a flexible size does not fit the cast's dtype.
        case castOverflow = "cast_overflow"
        /// A gather / scatter / slice index (range) leaves the tensor or state.
        case indexOutOfRange = "index_out_of_range"
        /// `slice_update` begin/end length differs from the rank of the tensor it writes.
        case sliceUpdateRank = "slice_update_rank"
        /// `squeeze` without axes on a flexible dimension (drops it too when it is 1).
        case squeezeFlexible = "squeeze_flexible"
        /// A flexible dimension broadcast against a fixed size > 1: only valid at 1 (where it
        /// silently repeats) and at that size.
        case broadcastSize1 = "broadcast_size1"
        /// The inferred type disagrees with the fixed type the file declares.
        case declaredTypeMismatch = "declared_type_mismatch"
        /// A rule could not evaluate this op's shape: the declared one is used, with `?` for
        /// what the file leaves unknown (a note, never a failure).
        case shapeUnknown = "shape_unknown"
    }
    public var kind: Kind
    public var opName: String
    public var opType: String
    /// Position of the op in the function body (pre-order over nested blocks).
    public var opIndex: Int
    public var message: String
    /// The shapes involved, by operand name (`x`, `y`, `update`, `output`…), in order.
    public var shapes: [(name: String, shape: IssueShape)]

    public var description: String {
        "\(kind.rawValue) at '\(opName)' (\(opType)): \(message)"
            + (shapes.isEmpty ? "" : " [" + shapes.map { "\($0.name): \($0.shape)" }.joined(separator: ", ") + "]")
    }
}

/// What one inference run produced.
public struct ShapeInferenceResult {
    /// The symbolic type of every value reached (function inputs and op outputs).
    public var types: [ObjectIdentifier: SymType] = [:]
    /// Known contents of small integer tensors.
    public var values: [ObjectIdentifier: SymValue] = [:]
    /// In concrete mode: at most one error (inference stops there). In symbolic mode: errors
    /// valid at every binding, and warnings (`broadcast_size1`, `squeeze_flexible`, …).
    public var issues: [ShapeIssue] = []
    /// The binding evaluated (nil: symbolic).
    public var binding: [String: Int]?
    /// Symbol pairs the graph forces equal (collected in symbolic mode).
    var equalities: [(String, String)] = []
    /// Ops evaluated before stopping.
    public var opsEvaluated = 0

    public func type(of v: Value) -> SymType? { types[ObjectIdentifier(v)] }
    public func value(of v: Value) -> SymValue? { values[ObjectIdentifier(v)] }
    public var firstError: ShapeIssue? { issues.first { $0.kind.isError } }
}

extension ShapeIssue.Kind {
    /// Errors stop an inference run; the others are warnings.
    public var isError: Bool {
        switch self {
        case .shapeError, .zeroDimension, .castOverflow, .indexOutOfRange, .sliceUpdateRank: return true
        case .squeezeFlexible, .broadcastSize1, .declaredTypeMismatch, .shapeUnknown: return false
        }
    }
}

/// A shape a ``ShapeIssue`` names, kept as dimensions (not text) so that diagnose prints every
/// shape in one format: an inferred shape, the contents of a small integer operand (slice
/// bounds, a reshape target: `isValue`), or a declared MIL type.
public struct IssueShape: Sendable, CustomStringConvertible {
    /// nil: rank unknown (or a declared type, see `declared`).
    public var dims: [DimExpr]?
    /// The dimensions are the operand's contents, not its shape.
    public var isValue: Bool
    /// The file's declared type, when that is what is named.
    public var declared: MILType?
    public init(shape: [DimExpr]?) { dims = shape; isValue = false; declared = nil }
    public init(value: [DimExpr]) { dims = value; isValue = true; declared = nil }
    public init(declared: MILType) { dims = nil; isValue = false; self.declared = declared }
    /// `[1, input_ids_1, 8]` (``describeShape``), or the declared type's MIL text.
    public var description: String { declared?.description ?? describeShape(dims) }
}

/// Thrown by a rule: the op's shapes are invalid.
struct RuleFailure: Error {
    var kind: ShapeIssue.Kind
    var message: String
    var shapes: [(String, IssueShape)]
}

/// Symbolic shape inference over one function.
///
/// Dimensions are ``DimExpr``s over one symbol per flexible dimension: the loader names each
/// flexible input axis (`input_ids_1`, `causal_mask_2`…); inference merges the names the
/// graph forces equal (broadcasting, concat, matmul…) into one ``SymbolClass``. Small integer
/// tensors (shapes, indices, lengths) are tracked by value, so `end = off + S` built from
/// `shape`/`gather`/`add`/`concat` is seen as such.
///
/// `infer(binding: nil)` runs symbolically; `infer(binding: ["input_ids_1": 16])` substitutes
/// the sizes and stops at the first op whose shapes are invalid — without running kernels.
public final class ShapeInference {
    public let function: Function
    public let interface: FunctionDescription?
    /// The flexible dimensions after merging, in input order.
    public private(set) var symbols: [SymbolClass] = []
    /// Input symbol name → its class name.
    public private(set) var canonical: [String: String] = [:]
    /// The symbolic run (after merging).
    public private(set) var symbolic: ShapeInferenceResult

    public init(function: Function, interface: FunctionDescription? = nil) {
        self.function = function
        self.interface = interface
        symbolic = ShapeInferenceResult()
        var members: [String: SymbolClass.Member] = [:]
        var order: [String] = []
        for v in function.inputs {
            guard let t = v.type.tensorType else { continue }
            let feature = interface?.inputs.first { $0.name == v.name }?.array
            for (axis, d) in t.shape.enumerated() {
                guard case let .symbol(sym) = d else { continue }
                let def = feature.flatMap { axis < $0.shape.count ? $0.shape[axis] : nil }
                // One symbol named on several axes (a shared `ct.RangeDim(symbol: "S")`) is one
                // flexible dimension: its first axis names it.
                guard members[sym.name] == nil else { continue }
                members[sym.name] = SymbolClass.Member(input: v.name, axis: axis, constraint: sym.constraint, defaultSize: def)
                order.append(sym.name)
            }
        }
        // Merge the names the graph forces equal, until nothing changes.
        var parent: [String: String] = [:]
        for n in order { parent[n] = n }
        func find(_ x: String) -> String {
            var r = x
            while let p = parent[r], p != r { r = p }
            return r
        }
        for _ in 0..<4 {
            canonical = Dictionary(uniqueKeysWithValues: order.map { ($0, find($0)) })
            let run = run(binding: nil)
            symbolic = run
            var merged = false
            for (a, b) in run.equalities {
                guard parent[a] != nil, parent[b] != nil else { continue }
                let ra = find(a), rb = find(b)
                if ra == rb { continue }
                // Keep the name of the member that comes first in input order.
                let (keep, drop) = order.firstIndex(of: ra)! < order.firstIndex(of: rb)! ? (ra, rb) : (rb, ra)
                parent[drop] = keep
                merged = true
            }
            if !merged { break }
        }
        canonical = Dictionary(uniqueKeysWithValues: order.map { ($0, find($0)) })
        var classes: [String: SymbolClass] = [:]
        var classOrder: [String] = []
        for n in order {
            let c = find(n)
            if classes[c] == nil { classes[c] = SymbolClass(name: c, members: []); classOrder.append(c) }
            classes[c]!.members.append(members[n]!)
        }
        symbols = classOrder.map { classes[$0]! }
    }

    public func symbolClass(named name: String) -> SymbolClass? { symbols.first { $0.name == name } }

    /// Runs inference symbolically (`binding == nil`) or with sizes for the symbols.
    public func infer(binding: [String: Int]?) -> ShapeInferenceResult {
        run(binding: binding)
    }

    // MARK: - the run

    private func run(binding: [String: Int]?) -> ShapeInferenceResult {
        let state = InferenceState(binding: binding, canonical: canonical)
        for v in function.inputs {
            state.types[ObjectIdentifier(v)] = state.symType(v.type, valueName: v.name)
            // Small fixed integer inputs (e.g. `cache_offset`): each element is a run-time value.
            if let t = v.type.tensorType, t.dtype.isInteger, let n = t.elementCount, n <= 64 {
                state.values[ObjectIdentifier(v)] = .elements((0..<n).map { .opaque("\(v.name)[\($0)]") })
            }
        }
        var index = 0
        _ = walk(function.body, state: state, index: &index)
        var r = ShapeInferenceResult()
        r.types = state.types
        r.values = state.values
        r.issues = state.issues
        r.binding = binding
        r.equalities = state.equalities
        r.opsEvaluated = index
        return r
    }

    /// Returns false when inference stopped at an error.
    private func walk(_ block: Block, state: InferenceState, index: inout Int) -> Bool {
        for op in block.operations {
            let myIndex = index
            index += 1
            var ctx = OpContext(op: op, state: state, index: myIndex)
            var outTypes: [SymType]
            // A rule reads `outputs[0]` of every op but write_state; a malformed op keeps its declared types.
            if let rule = OpRegistry.schema(op.type)?.shapeRule, !op.outputs.isEmpty || op.type == "write_state" {
                do {
                    outTypes = try rule(&ctx)
                } catch let f as RuleFailure {
                    state.issues.append(ShapeIssue(kind: f.kind, opName: op.name, opType: op.type, opIndex: myIndex, message: f.message,
                                                   shapes: f.shapes.map { (name: $0.0, shape: $0.1) }))
                    if f.kind.isError { return false }
                    outTypes = op.outputs.map { state.symType($0.type, valueName: $0.name) }
                } catch {
                    outTypes = op.outputs.map { state.symType($0.type, valueName: $0.name) }
                    if let u = error as? Unsupported, let reason = u.reason, state.binding == nil {
                        state.issues.append(ShapeIssue(kind: .shapeUnknown, opName: op.name, opType: op.type, opIndex: myIndex,
                                                       message: "\(reason): the shape is not evaluated here; the declared type is used (unknown dimensions shown as ?)",
                                                       shapes: op.outputs.map { (name: $0.name, shape: IssueShape(declared: $0.type)) }))
                    }
                }
            } else {
                outTypes = op.outputs.map { state.symType($0.type, valueName: $0.name) }
            }
            if outTypes.count != op.outputs.count {
                outTypes = op.outputs.map { state.symType($0.type, valueName: $0.name) }
            }
            for (v, t) in zip(op.outputs, outTypes) {
                state.types[ObjectIdentifier(v)] = t
                if state.binding == nil, let issue = declaredMismatch(v, inferred: t, op: op, index: myIndex) {
                    state.issues.append(issue)
                }
            }
            for (i, val) in ctx.outputValues where i < op.outputs.count {
                state.values[ObjectIdentifier(op.outputs[i])] = val
            }
            for b in op.blocks {
                for v in b.inputs { state.types[ObjectIdentifier(v)] = state.symType(v.type, valueName: v.name) }
                if !walk(b, state: state, index: &index) { return false }
            }
        }
        return true
    }

    /// A fixed dimension of the declared type that inference computes differently.
    private func declaredMismatch(_ v: Value, inferred: SymType, op: Op, index: Int) -> ShapeIssue? {
        guard let declared = v.type.tensorType, let inf = inferred.tensor, let shape = inf.shape else { return nil }
        guard !declared.shape.contains(.variadic) else { return nil }
        var bad = declared.rank != shape.count
        if !bad {
            for (d, e) in zip(declared.shape, shape) {
                if let f = d.fixedValue, let c = e.constant, f != c { bad = true }
            }
        }
        guard bad else { return nil }
        return ShapeIssue(kind: .declaredTypeMismatch, opName: op.name, opType: op.type, opIndex: index,
                          message: "the file declares \(v.name) as \(declared), inference gives \(describeShape(shape))",
                          shapes: [("declared", IssueShape(declared: .tensor(declared))), ("inferred", IssueShape(shape: shape))])
    }
}

/// Mutable state of one run.
final class InferenceState {
    var types: [ObjectIdentifier: SymType] = [:]
    var values: [ObjectIdentifier: SymValue] = [:]
    var issues: [ShapeIssue] = []
    var equalities: [(String, String)] = []
    let binding: [String: Int]?
    let canonical: [String: String]

    init(binding: [String: Int]?, canonical: [String: String]) {
        self.binding = binding
        self.canonical = canonical
    }

    var isConcrete: Bool { binding != nil }

    /// A dimension of a declared type as an expression.
    func dim(_ d: Dim, valueName: String, axis: Int) -> DimExpr {
        switch d {
        case let .fixed(v): return DimExpr(v)
        case let .symbol(s):
            let name = canonical[s.name] ?? s.name
            if let b = binding, let v = b[name] { return DimExpr(v) }
            return .symbol(name)
        case .unknown, .variadic: return .opaque("\(valueName).shape[\(axis)]")
        }
    }

    func symTensor(_ t: TensorType, valueName: String) -> SymTensor {
        if t.shape.contains(.variadic) { return SymTensor(t.dtype, nil) }
        return SymTensor(t.dtype, t.shape.enumerated().map { dim($0.element, valueName: valueName, axis: $0.offset) })
    }

    func symType(_ t: MILType, valueName: String) -> SymType {
        switch t {
        case let .tensor(tt): return .tensor(symTensor(tt, valueName: valueName))
        case let .state(inner):
            if let tt = inner.tensorType { return .state(symTensor(tt, valueName: valueName)) }
            return .other(t.description)
        default: return .other(t.description)
        }
    }
}
