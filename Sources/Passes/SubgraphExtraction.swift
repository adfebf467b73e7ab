import GraphIR

/// Errors of ``SubgraphExtraction``.
public struct ExtractionError: Error, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { description = d }
}

/// The subgraph between named values as a model of its own, like coremltools'
/// `ct.models.utils.extract_submodel` / `MLModelInspector`'s sub-models:
///
/// - outputs: the `to` values (op outputs of the function's top-level block, or its inputs);
/// - inputs: the `from` values, each becoming a function input of its type — an op output
///   whose type has unknown dimensions gets the symbolic shape inferred from the function's
///   inputs (``ShapeInference``): a dimension equal to an input's flexible dimension keeps
///   its RangeDim / enumerated sizes, another unknown dimension becomes `RangeDim(1..inf)`;
/// - plus every original input (states included) the slice still reads;
/// - the ops: every op between them (a backward slice from `to` stopped at `from`), in the
///   original order; a `write_state` to a state the slice reads before that read is kept
///   (with what it needs), so reads see the same state; weights are the same `const` ops and
///   blob references, carried into the written package.
///
/// ```
/// // model:   a = relu(x); b = mul(a, w); c = add(b, 1)
/// // extract --from a --to b:
/// func main(a) { w = const(); b = mul(a, w) } -> (b)
/// ```
///
/// The model is edited in place (load a fresh copy for this); other functions are dropped.
public enum SubgraphExtraction {
    /// - Throws: ``ExtractionError`` naming a value that does not exist, is not in the
    ///   top-level block, or a `to` value that does not depend on… anything reachable.
    public static func extract(_ model: Model, function name: String? = nil, from: [String], to: [String]) throws -> Model {
        let fname = name ?? model.defaultFunctionName
        guard let f = model.program.function(named: fname) else {
            throw ExtractionError("no function '\(fname)' (the model has: \(model.program.functions.map(\.name).joined(separator: ", ")))")
        }
        guard !to.isEmpty else { throw ExtractionError("--to names no value") }
        var byName: [String: Value] = [:]
        for v in f.inputs { byName[v.name] = v }
        for op in f.body.operations { for v in op.outputs { byName[v.name] = v } }
        func lookup(_ n: String, _ what: String) throws -> Value {
            guard let v = byName[n] else {
                var nested = false
                f.body.walk { op in if op.parent !== f.body, op.outputs.contains(where: { $0.name == n }) { nested = true } }
                if nested {
                    throw ExtractionError("\(what) value '\(n)' is inside a control-flow block; name values of the function's top level")
                }
                // An op's name (as diagnose prints them) where a value's is wanted: name its outputs.
                if let op = f.body.operations.first(where: { $0.name == n }), !op.outputs.isEmpty {
                    let outs = op.outputs.map { "'\($0.name)'" }.joined(separator: ", ")
                    throw ExtractionError("\(what): '\(n)' is an op (\(op.type)), not a value; its output\(op.outputs.count > 1 ? "s are" : " is") \(outs)")
                }
                throw ExtractionError("\(what): function '\(fname)' has no value '\(n)' (value names, left of '=' in 'forge-ir dump')"
                                      + NameSuggestion.hint(n, in: Array(byName.keys).sorted()))
            }
            return v
        }
        let fromValues = try from.map { try lookup($0, "--from") }
        let toValues = try to.map { try lookup($0, "--to") }
        let cut = Set(fromValues.map(ObjectIdentifier.init))

        // Backward slice.
        var needed = Set(toValues.map(ObjectIdentifier.init))
        var keep = [Bool](repeating: false, count: f.body.operations.count)
        var statesRead: [ObjectIdentifier: Int] = [:]   // state → index of the last kept op reading it
        func reads(_ op: Op) -> [Value] {
            var out = op.operandValues
            for b in op.blocks { b.walk { out += $0.operandValues }; out += b.outputs }
            return out
        }
        for (i, op) in f.body.operations.enumerated().reversed() {
            var take = op.outputs.contains { needed.contains(ObjectIdentifier($0)) && !cut.contains(ObjectIdentifier($0)) }
            if !take, op.type == "write_state", let s = op.operand("input")?.value, let last = statesRead[ObjectIdentifier(s)], last > i {
                take = true
            }
            guard take else { continue }
            keep[i] = true
            for v in reads(op) {
                needed.insert(ObjectIdentifier(v))
                if v.type.isState, statesRead[ObjectIdentifier(v)] == nil { statesRead[ObjectIdentifier(v)] = i }
            }
        }
        let ops = zip(f.body.operations, keep).filter(\.1).map(\.0)
        // Inputs: the from values (in order), then original inputs still read.
        let infer = ShapeInference(function: f, interface: model.description.interface(of: fname))
        var inputs: [Value] = []
        var replaced: [(Value, Value)] = []
        for v in fromValues {
            if f.inputs.contains(where: { $0 === v }) { inputs.append(v); continue }
            guard needed.contains(ObjectIdentifier(v)) || toValues.contains(where: { $0 === v }) else {
                throw ExtractionError("--from value '\(v.name)' is not read by anything on the way to \(to.map { "'\($0)'" }.joined(separator: ", "))")
            }
            guard case let .tensor(t) = v.type else { throw ExtractionError("--from value '\(v.name)' is \(v.type); only tensors can be inputs") }
            let nv = Value(name: v.name, type: .tensor(inferredType(t, of: v, infer)))
            inputs.append(nv)
            replaced.append((v, nv))
        }
        for v in f.inputs where needed.contains(ObjectIdentifier(v)) && !inputs.contains(where: { $0 === v }) {
            inputs.append(v)
        }
        inputs = inputs.filter { !$0.type.isState } + inputs.filter(\.type.isState)
        let body = Block(inputs: [], operations: ops, outputs: toValues, attributes: f.body.attributes)
        for (old, new) in replaced { body.replaceAllUses(of: old, with: new) }
        let sub = Function(name: f.name, inputs: inputs, opset: f.opset, body: body, attributes: f.attributes)

        // Description: inputs, outputs and states of the new function.
        let iface = model.description.interface(of: fname)
        var d = ModelDescription()
        d.metadata = model.description.metadata
        d.inputs = inputs.filter { !$0.type.isState }.compactMap { v in iface.inputs.first { $0.name == v.name } ?? feature(v) }
        d.states = inputs.filter(\.type.isState).compactMap { v in iface.states.first { $0.name == v.name } ?? feature(v) }
        d.outputs = body.outputs.compactMap { v in iface.outputs.first { $0.name == v.name } ?? feature(v, output: true) }
        model.description = d
        model.program.functions = [sub]
        return model
    }

    /// `t` with unknown dimensions replaced by the symbolic shape inference gives for `v`.
    static func inferredType(_ t: TensorType, of v: Value, _ infer: ShapeInference) -> TensorType {
        guard !t.isStatic else { return t }
        let sym = infer.symbolic.type(of: v)?.tensor?.shape
        var dims: [Dim] = []
        for (axis, d) in t.shape.enumerated() {
            if d.isFixed { dims.append(d); continue }
            if let e = sym.flatMap({ axis < $0.count ? $0[axis] : nil }) {
                if let c = e.constant { dims.append(.fixed(c)); continue }
                if let name = e.symbolName, let cls = infer.symbols.first(where: { $0.name == name }) {
                    dims.append(.symbol(DimSymbol(name: "\(v.name)_\(axis)", constraint: cls.constraint ?? .range(lower: 1, upper: nil))))
                    continue
                }
            }
            dims.append(.symbol(DimSymbol(name: "\(v.name)_\(axis)", constraint: .range(lower: 1, upper: nil))))
        }
        return TensorType(t.dtype, dims)
    }

    /// A description entry for a value with no entry in the original description.
    static func feature(_ v: Value, output: Bool = false) -> FeatureDescription? {
        let inner: TensorType?
        switch v.type {
        case let .tensor(t): inner = t
        case let .state(s): inner = s.tensorType
        default: inner = nil
        }
        guard let t = inner, let dt = ArrayDataType.allCases.first(where: { $0.dtype == t.dtype }) else { return nil }
        var shape: [Int] = []
        var ranges: [SizeRange] = []
        var flexible = false
        for d in t.shape {
            switch d {
            case let .fixed(n): shape.append(n); ranges.append(SizeRange(lower: n, upper: n))
            case let .symbol(s):
                flexible = true
                switch s.constraint {
                case let .range(lo, hi): shape.append(max(lo, 1)); ranges.append(SizeRange(lower: lo, upper: hi))
                case let .enumerated(vals): shape.append(vals.first ?? 1); ranges.append(SizeRange(lower: vals.min() ?? 1, upper: vals.max()))
                case .unconstrained: shape.append(1); ranges.append(SizeRange(lower: 1, upper: nil))
                }
            default: flexible = true; shape.append(1); ranges.append(SizeRange(lower: 1, upper: nil))
            }
        }
        let a = ArrayFeature(shape: shape, dataType: dt, flexibility: flexible && v.type.tensorType != nil ? .range(ranges) : .none)
        if v.type.isState { return FeatureDescription(name: v.name, kind: .state(ArrayFeature(shape: shape, dataType: dt))) }
        // Outputs with flexible shapes: coremltools leaves the shape empty.
        if output && flexible { return FeatureDescription(name: v.name, kind: .multiArray(ArrayFeature(shape: [], dataType: dt))) }
        return FeatureDescription(name: v.name, kind: .multiArray(a))
    }
}
