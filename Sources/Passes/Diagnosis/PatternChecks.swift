import GraphIR
import Interpreter

/// The catalogue patterns found by reading the graph (see ``Catalogue``): flexibility next to
/// states, narrowed gather indices, large gather tables, bad quantization scales, coremltools'
/// RMSNorm lowering, state sizes, the rank-0 `expand_dims` trigger and ops without a kernel.
enum PatternChecks {
    static func run(function f: Function, interface: FunctionDescription) -> [Finding] {
        var out: [Finding] = []
        let idx = OpIndex(f)
        let uses = UseMap(f)
        var ops: [Op] = []
        f.body.walk { ops.append($0) }
        out += flexibility(f, interface)
        for op in ops {
            switch op.type {
            case "cast": out += narrowingCast(op, f, idx, uses)
            case "gather": out += largeTable(op, f, idx)
            case "constexpr_blockwise_shift_scale", "constexpr_affine_dequantize", "dequantize":
                out += scales(op, f, idx)
            case "add":
                if let m = CoremltoolsRMSNorm.match(addEps: op, uses: uses) {
                    out.append(Catalogue.finding("rmsnorm_eps_scaled", function: f.name, op: idx.ref(op),
                                                 shapes: [ShapeNote("x", m.x.type)],
                                                 message: "eps \(m.eps) is added to the mean of (x / max|x|)²: the norm computes x / sqrt(mean(x²) + eps·max|x|²), not x / sqrt(mean(x²) + eps)"))
                }
            default: break
            }
            if Rank0ExpandDims.isTrigger(op, uses: uses) {
                out.append(Catalogue.finding("rank0_expand_dims_swap", function: f.name, op: idx.ref(op),
                                             shapes: [ShapeNote("x", op.outputs[0].type)],
                                             message: "rank-0 \(op.type) '\(op.outputs[0].name)' of a scalar constant feeds one expand_dims(axes = [0]) and a tuple input (\(Rank0ExpandDims.tupleUsers(op, uses: uses).map(\.type).joined(separator: ", "))); coremltools' default pipeline fails in rank0_expand_dims_swap (\"Cannot delete op\")"))
            }
        }
        // States whose last dimension is not a multiple of 32 (Neural Engine).
        for v in f.stateInputs {
            guard let t = v.type.stateWrappedTensor, let last = t.shape.last?.fixedValue, last % 32 != 0 else { continue }
            out.append(Catalogue.finding("state_dim_not_multiple_of_32", function: f.name, shapes: [ShapeNote(v.name, t)],
                                         message: "state '\(v.name)' has a last dimension of \(last), not a multiple of 32; stateful models with such states fail on the Neural Engine"))
        }
        // Ops without a kernel in forge-ir.
        var missing: [String: Op] = [:]
        for op in ops where op.type != "const" && !(OpRegistry.schema(op.type)?.isControlFlow ?? false) && KernelRegistry.kernel(for: op.type) == nil {
            if missing[op.type] == nil { missing[op.type] = op }
        }
        for (type, op) in missing.sorted(by: { $0.key < $1.key }) {
            out.append(Catalogue.finding("unsupported_op", function: f.name, op: idx.ref(op),
                                         message: "op type '\(type)' has no kernel in forge-ir: run, bench, generate and the run-time checks refuse function '\(f.name)'"))
        }
        return out
    }

    // MARK: - flexibility next to states, enumerated combinations

    static func flexibility(_ f: Function, _ iface: FunctionDescription) -> [Finding] {
        var out: [Finding] = []
        let stateful = !f.stateInputs.isEmpty
        func notes(_ names: [String]) -> [ShapeNote] {
            names.compactMap { n in iface.inputs.first { $0.name == n }.map { ShapeNote(n, feature: $0) } }
        }
        var enumerated: [(String, [[Int]])] = []
        var ranged: [String] = []
        var rangedInts: [String] = []
        var fixed: [String] = []
        for input in iface.inputs {
            guard let a = input.array else { continue }
            switch a.flexibility {
            case let .enumerated(shapes): enumerated.append((input.name, shapes))
            case let .range(r) where !r.allSatisfy(\.isFixed):
                ranged.append(input.name)
                if let dt = a.dataType?.dtype, dt.isInteger { rangedInts.append(input.name) }
            default: fixed.append(input.name)
            }
        }
        if stateful, !ranged.isEmpty, !enumerated.isEmpty || !fixed.isEmpty {
            // EnumeratedShapes next to RangeDim is the exception itself; a fixed input next to a
            // RangeDim one is #2548's repro (Core ML takes the fixed shape as enumerated).
            let other = enumerated.isEmpty ? fixed : enumerated.map(\.0)
            var f = Catalogue.finding("state_mixed_flexibility", function: f.name,
                                      shapes: notes(enumerated.map(\.0) + fixed + ranged),
                                      message: "stateful function '\(f.name)' mixes \(enumerated.isEmpty ? "fixed" : "EnumeratedShapes") inputs (\(other.joined(separator: ", "))) with RangeDim inputs (\(ranged.joined(separator: ", "))); Core ML aborts loading with EnumeratedWithRangeInputsException")
            if enumerated.isEmpty { f.severity = .warning }
            out.append(f)
        }
        if stateful, !rangedInts.isEmpty {
            out.append(Catalogue.finding("state_range_int_input", function: f.name,
                                         shapes: notes(rangedInts),
                                         message: "integer input\(rangedInts.count > 1 ? "s" : "") \(rangedInts.joined(separator: ", ")) with a RangeDim next to \(f.stateInputs.count) state\(f.stateInputs.count == 1 ? "" : "s"): Core ML fails to build the execution plan (std::bad_cast, error -14) or to run at S=1, and a flexible query length keeps it from compiling efficient kernels"))
        }
        if enumerated.count >= 2 {
            let combos = enumerated.map(\.1.count).reduce(1, *)
            out.append(Catalogue.finding("enumerated_shapes_combinations", function: f.name,
                                         shapes: notes(enumerated.map(\.0)),
                                         message: "\(enumerated.count) inputs have their own EnumeratedShapes (\(enumerated.map(\.0).joined(separator: ", "))): Core ML accepts only the listed combinations in order, not the \(combos) of the cross product"))
        }
        return out
    }

    // MARK: - casts and gathers

    static let narrow: [DType: Int] = [.int8: 127, .uint8: 255, .int16: 32767, .uint16: 65535]

    /// Is `v` computed from the values of a (non-state) function input? `shape` of an input is
    /// not its values.
    static func fromInput(_ v: Value, _ f: Function, depth: Int = 0, seen: inout Set<ObjectIdentifier>) -> Bool {
        guard depth < 64, seen.insert(ObjectIdentifier(v)).inserted else { return false }
        guard let p = v.producer else { return f.inputs.contains { $0 === v } && !v.type.isState }
        if p.type == "shape" || p.type == "const" || p.type == "read_state" { return false }
        for o in p.operandValues where fromInput(o, f, depth: depth + 1, seen: &seen) { return true }
        return false
    }

    /// The gathers whose `indices` are computed from `v` (through integer-valued ops: casts back
    /// and forth, reshape, the negative-index `select`…), and whether `v` reaches anything else
    /// (a non-integer result or a function output).
    static func gatherUsers(_ v: Value, _ uses: UseMap) -> (gathers: [Op], others: Bool) {
        var gathers: [Op] = [], others = false
        var frontier = [v]
        var seen = Set<ObjectIdentifier>([ObjectIdentifier(v)])
        var steps = 0
        while let w = frontier.popLast(), steps < 256 {
            steps += 1
            if uses.isReturned(w) { others = true }
            for u in uses.users(of: w) {
                if u.type == "gather", u.operand("indices")?.value === w {
                    if !gathers.contains(where: { $0 === u }) { gathers.append(u) }
                    continue
                }
                var integerOut = false
                for o in u.outputs where o.type.tensorType.map({ $0.dtype.isInteger || $0.dtype == .bool }) ?? false {
                    integerOut = true
                    if seen.insert(ObjectIdentifier(o)).inserted { frontier.append(o) }
                }
                if !integerOut { others = true }
            }
        }
        return (gathers, others)
    }

    /// Rows of the table a gather picks from (x.shape[axis]).
    static func tableRows(_ g: Op) -> Int? {
        guard let xt = g.operand("x")?.type.tensorType, xt.rank > 0 else { return nil }
        var axis = g.operand("axis")?.constValue?.ints()?.first ?? 0
        if axis < 0 { axis += xt.rank }
        guard axis >= 0, axis < xt.rank else { return nil }
        return xt.shape[axis].fixedValue
    }

    static func narrowingCast(_ op: Op, _ f: Function, _ idx: OpIndex, _ uses: UseMap) -> [Finding] {
        guard let dtName = op.operand("dtype")?.constValue?.stringValue,
              let dt = DType(rawValue: dtName), let limit = narrow[dt],
              let x = op.operand("x")?.value, let xt = x.type.tensorType, xt.dtype == .int32 || xt.dtype == .int64,
              let out = op.outputs.first else { return [] }
        var seen = Set<ObjectIdentifier>()
        guard fromInput(x, f, seen: &seen) else { return [] }
        let (gathers, others) = gatherUsers(out, uses)
        let tooSmall = gathers.filter { (tableRows($0) ?? 0) > limit + 1 }
        if let g = tooSmall.first {
            return [Catalogue.finding("gather_index_narrowed", function: f.name, op: idx.ref(op),
                                      shapes: [ShapeNote("x", xt)] + (g.operand("x").map { [ShapeNote("table", $0.type)] } ?? []),
                                      message: "the indices of gather '\(g.name)' are cast from \(xt.dtype.rawValue) to \(dt.rawValue) (at most \(limit)) but its table has \(tableRows(g)!) rows: larger ids wrap and gather the wrong rows")]
        }
        // coremltools' own add_int16_cast form (indices of gathers whose tables fit) is fine.
        if gathers.isEmpty || others && gathers.isEmpty {
            // A whole int32 table input narrowed in front of its gather: coremltools'
            // add_int16_cast on an int8 table an iOS 18 export had to widen (issue #17).
            let tableGather = f.inputs.contains { $0 === x }
                ? uses.users(of: out).first { $0.type.hasPrefix("gather") && $0.operand("x")?.value === out } : nil
            let message = tableGather.map { g in
                "the \(xt.dtype.rawValue) table input '\(x.name)' \(xt) is cast to \(dt.rawValue) whole before gather '\(g.name)' reads it (coremltools' add_int16_cast narrows int32 gather inputs with no range check — an int8 table widened to int32 for an iOS 18 target): entries outside \(dt.rawValue)'s range wrap silently"
            } ?? "'\(x.name)', computed from a function input, is cast from \(xt.dtype.rawValue) to \(dt.rawValue) (at most \(limit)): larger values wrap"
            return [Catalogue.finding("narrowing_cast_on_input", function: f.name, op: idx.ref(op),
                                      shapes: [ShapeNote("x", xt)], message: message,
                                      fix: tableGather == nil ? nil : "keep the table int8 (an iOS 26 target takes int8 inputs), or convert without add_int16_cast (pass_pipeline.remove_passes(\"common::add_int16_cast\"))")]
        }
        return []
    }

    static func largeTable(_ op: Op, _ f: Function, _ idx: OpIndex) -> [Finding] {
        guard let rows = tableRows(op), rows > 65535, let ind = op.operand("indices")?.value else { return [] }
        var seen = Set<ObjectIdentifier>()
        guard fromInput(ind, f, seen: &seen) else { return [] }
        return [Catalogue.finding("gather_table_over_uint16", function: f.name, op: idx.ref(op),
                                  shapes: op.operand("x").map { [ShapeNote("x", $0.type)] } ?? [],
                                  message: "gather '\(op.name)' indexes a table of \(rows) rows with run-time ids: the Neural Engine's gather takes uint16 indices (at most 65535)")]
    }

    // MARK: - quantization scales

    static func scales(_ op: Op, _ f: Function, _ idx: OpIndex) -> [Finding] {
        guard let s = Consts.value(op, "scale"), let v = s.doubles(), let st = s.type.tensorType else { return [] }
        var zero: [Int] = [], nan: [Int] = [], inf: [Int] = []
        for (i, x) in v.enumerated() {
            if x == 0 { zero.append(i) } else if x.isNaN { nan.append(i) } else if x.isInfinite { inf.append(i) }
        }
        guard !(zero.isEmpty && nan.isEmpty && inf.isEmpty) else { return [] }
        // Element i of a [C, B] scale is channel i / B (axis 0 of the scale).
        let perChannel = st.rank >= 1 ? (st.shape.dropFirst().compactMap(\.fixedValue).reduce(1, *)) : 1
        func channels(_ a: [Int]) -> String {
            let c = Array(Set(a.map { $0 / Swift.max(perChannel, 1) })).sorted()
            return c.prefix(8).map(String.init).joined(separator: ", ") + (c.count > 8 ? ", … (\(c.count) channels)" : "")
        }
        var parts: [String] = []
        if !zero.isEmpty { parts.append("\(zero.count) zero (channel \(channels(zero)))") }
        if !nan.isEmpty { parts.append("\(nan.count) NaN (channel \(channels(nan)))") }
        if !inf.isEmpty { parts.append("\(inf.count) inf (channel \(channels(inf)))") }
        let weight = op.outputs.first?.name ?? op.name
        return [Catalogue.finding("quantization_scale_invalid", function: f.name, op: idx.ref(op),
                                  shapes: [ShapeNote("scale", st)],
                                  message: "quantized weight '\(weight)' has \(parts.joined(separator: ", ")) scale\(v.count == 1 ? "" : "s") of \(v.count): those blocks dequantize to all zeros, NaN or inf")]
    }
}
