import GraphIR

/// Op positions in a function body (pre-order over nested blocks), for locating findings.
public struct OpIndex {
    private var index: [ObjectIdentifier: Int] = [:]
    public init(_ f: Function) {
        var i = 0
        f.body.walk { op in index[ObjectIdentifier(op)] = i; i += 1 }
    }
    public func ref(_ op: Op) -> Finding.OpRef { Finding.OpRef(name: op.name, type: op.type, index: index[ObjectIdentifier(op)] ?? -1) }
}

/// Patterns of stateful models Core ML fails on.
enum StateChecks {
    static func run(function f: Function, interface: FunctionDescription, inference: ShapeInference) -> [Finding] {
        var out: [Finding] = []
        let idx = OpIndex(f)
        let sym = inference.symbolic
        func shape(_ name: String, _ v: Value) -> ShapeNote {
            if let t = sym.type(of: v)?.tensor ?? sym.type(of: v)?.stateTensor { return ShapeNote(name, t) }
            return ShapeNote(name, v.type)
        }

        // Every op, with the state each write_state writes.
        var ops: [Op] = []
        f.body.walk { ops.append($0) }
        let writes = ops.filter { $0.type == "write_state" }

        // 1. A slice write into a state whose begin/end are computed at run time.
        for op in ops where op.type == "slice_update" {
            guard let result = op.outputs.first else { continue }
            var stateName: String?
            for w in writes where w.operand("data")?.value === result { stateName = w.operand("input")?.value?.name }
            if stateName == nil, let p = op.producer(of: "x", type: "read_state") {
                stateName = p.operand("input")?.value?.name
            }
            guard let state = stateName else { continue }
            var dynamic: [String] = []
            for name in ["begin", "end"] {
                guard let o = op.operand(name) else { continue }
                if o.constant != nil { continue }
                guard let v = o.value else { continue }
                if v.producer?.type == "const" { continue }
                if let known = sym.value(of: v) {
                    if known.isConstant { continue }
                    dynamic.append("\(name) = \(known)")
                } else {
                    dynamic.append("\(name) = \(v.name) (unknown)")
                }
            }
            guard !dynamic.isEmpty else { continue }
            var shapes: [ShapeNote] = []
            if let x = op.operand("x")?.value { shapes.append(shape("x", x)) }
            if let u = op.operand("update")?.value { shapes.append(shape("update", u)) }
            let which = dynamic.contains { $0.hasPrefix("end") } ? "end index" : "begin index"
            out.append(Catalogue.finding("state_write_runtime_end", function: f.name, op: idx.ref(op), shapes: shapes,
                                         message: "slice_update writes state '\(state)' through a slice whose \(which) is computed at run time (\(dynamic.joined(separator: "; "))); Core ML fails to build the execution plan for such a write on some backends (E5RT/BNNS errors, an ANECompiler crash on the Neural Engine), though Apple's Llama 3.1 recipe runs it on the GPU",
                                         fix: "Run the lower_slice_update pass (rewrites the write with a static window), or write the cache with index_copy/scatter."))
        }

        // 2. A model output that is also the value written to a state.
        for (i, v) in f.outputs.enumerated() {
            for w in writes where w.operand("data")?.value === v {
                let state = w.operand("input")?.value?.name ?? "?"
                out.append(Finding(.error, "state_output_alias", function: f.name, op: idx.ref(w),
                                   shapes: [shape("output", v)],
                                   message: "output \(i) '\(v.name)' is the value written to state '\(state)'; Core ML crashes at run time when an output aliases a state write",
                                   fixPass: "insert_state_output_copy",
                                   fix: "Run insert_state_output_copy (returns an identity copy of the value instead)."))
            }
        }

        // 3. State inputs against the description's states.
        let declared = interface.states
        let inputs = f.stateInputs
        if !(declared.isEmpty && inputs.isEmpty) {
            for s in declared {
                guard let v = inputs.first(where: { $0.name == s.name }) else {
                    out.append(Finding(.error, "state_description_mismatch", function: f.name,
                                       message: "the description declares state '\(s.name)' but function '\(f.name)' has no such state input",
                                       fix: "Re-export so that the description's states and the function's state inputs match."))
                    continue
                }
                guard let a = s.array, let t = v.type.stateWrappedTensor else { continue }
                let fileShape = t.fixedShape
                let dt = a.dataType?.dtype
                if (fileShape != nil && !a.shape.isEmpty && fileShape! != a.shape) || (dt != nil && dt != t.dtype) {
                    out.append(Finding(.error, "state_description_mismatch", function: f.name,
                                       shapes: [ShapeNote("description", dtype: dt, shape: a.shape), ShapeNote("function", t)],
                                       message: "state '\(s.name)' is \(ShapeNote(s.name, dtype: dt, shape: a.shape).typeText) in the description but \(ShapeNote(s.name, t).typeText) in the function",
                                       fix: "Re-export so that the description's states and the function's state inputs match."))
                }
            }
            for v in inputs where !declared.contains(where: { $0.name == v.name }) {
                out.append(Finding(.error, "state_description_mismatch", function: f.name,
                                   message: "function '\(f.name)' takes state '\(v.name)' that the description does not declare",
                                   fix: "Declare the state in the description (ct.StateType) or remove the input."))
            }
            for v in f.inputs where !v.type.isState && declared.contains(where: { $0.name == v.name }) {
                out.append(Finding(.error, "state_description_mismatch", function: f.name,
                                   message: "'\(v.name)' is a state in the description but a regular input of function '\(f.name)'",
                                   fix: "Re-export so that the description's states and the function's state inputs match."))
            }
        }
        return out
    }
}

/// Flexible-shape declarations Core ML rejects or handles badly.
enum FlexibleShapeChecks {
    static func run(function f: Function, interface: FunctionDescription, inference: ShapeInference) -> [Finding] {
        var out: [Finding] = []
        let stateful = !f.stateInputs.isEmpty
        var kinds: [String: String] = [:]   // input -> "enumerated" | "range" | "fixed"
        for input in interface.inputs {
            guard let a = input.array else { continue }
            switch a.flexibility {
            case .none: kinds[input.name] = "fixed"
            case let .range(ranges):
                kinds[input.name] = ranges.allSatisfy(\.isFixed) ? "fixed" : "range"
                for (axis, r) in ranges.enumerated() where r.lower == 0 && r.upper != 0 {
                    out.append(Finding(.error, "range_lower_bound_zero", function: f.name,
                                       shapes: [ShapeNote(input.name, feature: input)],
                                       message: "input '\(input.name)' axis \(axis) is RangeDim(0..\(r.upper.map(String.init) ?? "inf")); a zero-sized input is not runnable and Core ML fails to load or run such models",
                                       fix: "Set the RangeDim lower bound to 1 (ct.RangeDim(lower_bound=1, …))."))
                }
            case let .enumerated(shapes):
                kinds[input.name] = "enumerated"
                _ = shapes
            }
        }
        let enumerated = kinds.filter { $0.value == "enumerated" }.keys.sorted()
        let ranged = kinds.contains { $0.value == "range" }
        if stateful, !enumerated.isEmpty, !ranged {   // mixed with RangeDim: state_mixed_flexibility
            let others = kinds.filter { $0.value != "enumerated" }.map { "\($0.key) (\($0.value))" }.sorted()
            let mix = others.isEmpty ? "" : "; mixed with \(others.joined(separator: ", "))"
            out.append(Finding(.error, "enumerated_shapes_with_state", function: f.name,
                               shapes: enumerated.compactMap { n in interface.inputs.first { $0.name == n }.map { ShapeNote(n, feature: $0) } },
                               message: "stateful function '\(f.name)' has EnumeratedShapes inputs (\(enumerated.joined(separator: ", ")))\(mix); Core ML refuses to load stateful models with enumerated shapes",
                               fixPass: "specialize_sequence",
                               fix: "One static function per size in a multifunction package (specialize_sequence), sharing the states."))
        }
        for c in inference.symbols where c.members.count > 1 && c.hasConflictingConstraints {
            let detail = c.members.map { "\($0): \(DimSymbol(name: "", constraint: $0.constraint))" }.joined(separator: ", ")
            if c.constraint == nil {
                out.append(Finding(.error, "flexible_constraint_mismatch", function: f.name,
                                   message: "the graph forces \(c.members.map(\.description).joined(separator: " = ")) equal, but their declared sizes have nothing in common (\(detail))",
                                   fix: "Declare the same RangeDim / enumerated sizes on every input axis that carries this dimension."))
            } else {
                out.append(Finding(.warning, "flexible_constraint_mismatch", function: f.name,
                                   message: "the graph forces \(c.members.map(\.description).joined(separator: " = ")) equal, but they are declared differently (\(detail)); only \(c.constraintText) is usable and some listed combinations fail",
                                   fix: "Declare the same RangeDim / enumerated sizes on every input axis that carries this dimension."))
            }
        }
        return out
    }
}
