import GraphIR
import Interpreter

/// `lower_slice_update`: rewrites a KV-cache write whose slice end is computed at run time
/// (`slice_update` with `end = begin + S` built through `concat`, `stack`, `expand_dims`, `add`, casts…)
/// into the static-window form: the S new rows are written at `begin + range(S)` by a `scatter`
/// (mode `update`) along the one axis that is not taken whole. Numerically identical; the state
/// shapes and the function signature do not change. The end-index computation is left for
/// `dead_code_elimination`.
///
/// This is the write coremltools 9's `rank0_expand_dims_swap` pass crashes on ("Cannot delete op
/// 'end_1' …") and that Core ML's host runtime fails to execute at small S.
///
/// ```
/// before:
///   tensor<int32, [4]> begin = concat(values = (z, z, off, z), axis = 0)
///   tensor<int32, [4]> end = concat(values = (z, z, off_plus_s, z), axis = 0)
///   tensor<fp16, [1, 2, 64, 16]> k2 = slice_update(x = k, update = new, begin = begin, end = end,
///                                                  end_mask = [true, true, false, true], …)
/// after:
///   tensor<int32, [4]> new_shape = shape(x = new)
///   int32 s = gather(x = new_shape, indices = 2, axis = 0)
///   tensor<int32, [?]> rows = range_1d(start = 0, end = s, step = 1)
///   tensor<int32, [?]> idx = add(x = rows, y = off)
///   tensor<fp16, [1, 2, 64, 16]> k2 = scatter(data = k, indices = idx, updates = new, axis = 2, mode = "update")
/// ```
public struct LowerSliceUpdate: FunctionPass {
    public static let name = "lower_slice_update"
    public static let summary = "Rewrite slice writes with a run-time end index into a static-window scatter."
    public init() {}

    public func run(on function: Function, in model: Model) throws -> PassResult {
        var result = PassResult()
        let n = try RewriteDriver.run(function, in: model, patterns: [Self.pattern])
        result.count("slice writes lowered", n)
        return result
    }

    /// Where element `i` of a rank-1 int tensor comes from.
    enum Element {
        case constant(Int)
        /// A run-time value: a rank-0 scalar, or a rank-1 length-1 tensor (`lengthOne`).
        case runtime(Value, lengthOne: Bool)
        case unknown
    }

    static func constTensor(_ v: Value) -> Tensor? {
        guard let p = v.producer, p.type == "const", let c = p.constValue else { return nil }
        return try? ConstConversion.tensor(c)
    }

    static func constTensor(_ o: Operand?) -> Tensor? {
        guard let o else { return nil }
        switch o {
        case let .constant(c): return try? ConstConversion.tensor(c)
        case let .value(v): return constTensor(v)
        }
    }

    /// Element `i` of `v`, followed through `concat` (axis 0) of rank-1 pieces, `stack` (axis 0)
    /// of rank-0 values and `expand_dims`.
    static func element(_ v: Value, _ i: Int, depth: Int = 0) -> Element {
        guard depth < 16 else { return .unknown }
        if let t = constTensor(v) {
            let ints = t.ints
            return i < ints.count ? .constant(Int(ints[i])) : .unknown
        }
        guard let p = v.producer else { return .unknown }
        switch p.type {
        case "concat":
            guard let axis = constTensor(p.operand("axis"))?.ints.first, axis == 0 || axis == -1,
                  let pieces = p.input("values")?.operands else { return .unknown }
            var offset = 0
            for piece in pieces {
                guard let t = piece.type.tensorType, t.rank == 1, let len = t.shape[0].fixedValue else { return .unknown }
                if i < offset + len {
                    switch piece {
                    case let .value(pv): return element(pv, i - offset, depth: depth + 1)
                    case let .constant(c):
                        guard let ints = try? ConstConversion.tensor(c).ints, i - offset < ints.count else { return .unknown }
                        return .constant(Int(ints[i - offset]))
                    }
                }
                offset += len
            }
            return .unknown
        case "expand_dims":
            guard i == 0, let x = p.operand("x")?.value, x.type.tensorType?.rank == 0 else { return .unknown }
            if let t = constTensor(x), t.ints.count == 1 { return .constant(Int(t.ints[0])) }
            return .runtime(x, lengthOne: false)
        case "stack":
            // stack(values = (a, b, c, …), axis = 0) of rank-0 values: element i is values[i].
            guard let axis = constTensor(p.operand("axis"))?.ints.first, axis == 0 || axis == -1,
                  let pieces = p.input("values")?.operands, i < pieces.count,
                  pieces.allSatisfy({ $0.type.tensorType?.rank == 0 }) else { return .unknown }
            if let t = constTensor(pieces[i]) { return t.ints.count == 1 ? .constant(Int(t.ints[0])) : .unknown }
            guard let pv = pieces[i].value else { return .unknown }
            return .runtime(pv, lengthOne: false)
        default:
            if let t = v.type.tensorType, t.rank == 1, t.shape[0] == .fixed(1), i == 0 { return .runtime(v, lengthOne: true) }
            return .unknown
        }
    }

    static func pattern(_ op: Op, _ ctx: RewriteContext) throws -> Bool {
        guard op.type == "slice_update",
              let x = op.operand("x")?.value, let xt = x.type.tensorType, let shape = xt.fixedShape,
              let update = op.operand("update")?.value, let ut = update.type.tensorType,
              let begin = op.operand("begin")?.value, let end = op.operand("end")?.value,
              constTensor(end) == nil || constTensor(begin) == nil  // a bound computed at run time
        else { return false }
        let r = shape.count
        if let stride = op.operand("stride") {
            guard let s = constTensor(stride)?.ints, s.allSatisfy({ $0 == 1 }) else { return false }
        }
        let squeezeMask = op.operand("squeeze_mask").map { constTensor($0)?.bools } ?? [Bool](repeating: false, count: r)
        let beginMask = op.operand("begin_mask").map { constTensor($0)?.bools } ?? [Bool](repeating: false, count: r)
        let endMask = op.operand("end_mask").map { constTensor($0)?.bools } ?? [Bool](repeating: false, count: r)
        guard let bm = beginMask, let em = endMask, let sm = squeezeMask, bm.count == r, em.count == r, sm.count == r,
              ut.rank == r - sm.filter({ $0 }).count else { return false }
        // One axis written at a run-time offset; every other axis taken whole, or a constant
        // window / index (squeezed) — those are cut out first and written back after.
        var axis: Int?
        var window: [(begin: Int, end: Int)] = []
        var partial = false
        var updateAxis = 0
        var kUpdate = 0
        for a in 0..<r {
            let b = bm[a] ? Element.constant(0) : element(begin, a)
            let e = em[a] ? Element.constant(shape[a]) : element(end, a)
            if sm[a] {
                guard case var .constant(c) = b else { return false }
                if c < 0 { c += shape[a] }
                guard c >= 0, c < shape[a] else { return false }
                window.append((c, c + 1)); partial = true
                continue
            }
            defer { updateAxis += 1 }
            if case var .constant(bv) = b, case var .constant(ev) = e {
                if em[a] { ev = shape[a] }
                if bv < 0 { bv += shape[a] }
                if ev < 0 { ev += shape[a] }
                guard bv >= 0, ev <= shape[a], ev > bv else { return false }
                if bv != 0 || ev != shape[a] { partial = true }
                guard ut.shape[updateAxis].fixedValue.map({ $0 == ev - bv }) ?? true else { return false }
                window.append((bv, ev))
                continue
            }
            guard axis == nil else { return false }
            axis = a
            kUpdate = updateAxis
            window.append((0, shape[a]))
        }
        guard let k = axis else { return false }
        // begin[k] as an int32 scalar.
        var newOps: [Op] = []
        func const(_ base: String, _ t: Tensor, _ type: TensorType) -> Value {
            let name = ctx.names.fresh(base)
            let c = Op.const(name, ConstEncoding.constValue(t, type: type)!)
            newOps.append(c)
            return c.outputs[0]
        }
        let scalarInt = TensorType(.int32, [])
        let kConst = const("\(op.name)_axis", .scalar(Int32(k)), scalarInt)
        let zero = const("\(op.name)_zero", .scalar(Int32(0)), scalarInt)
        let one = const("\(op.name)_one", .scalar(Int32(1)), scalarInt)
        var offset: Value
        switch element(begin, k) {
        case let .constant(c):
            offset = const("\(op.name)_begin", .scalar(Int32(c)), scalarInt)
        case let .runtime(v, lengthOne) where v.type.tensorType?.dtype == .int32:
            if lengthOne {
                let g = Op(type: "gather", inputs: [OpInput(name: "x", operands: [.value(v)]), OpInput(name: "indices", operands: [.value(zero)]),
                                                    OpInput(name: "axis", operands: [.value(zero)])],
                           outputs: [Value(name: ctx.names.fresh("\(op.name)_begin"), type: .tensor(scalarInt))])
                newOps.append(g)
                offset = g.outputs[0]
            } else {
                offset = v
            }
        default:
            guard begin.type.tensorType?.dtype == .int32 else { return false }
            let g = Op(type: "gather", inputs: [OpInput(name: "x", operands: [.value(begin)]), OpInput(name: "indices", operands: [.value(kConst)]),
                                                OpInput(name: "axis", operands: [.value(zero)])],
                       outputs: [Value(name: ctx.names.fresh("\(op.name)_begin"), type: .tensor(scalarInt))])
            newOps.append(g)
            offset = g.outputs[0]
        }
        // S = update.shape[k].
        let rows: Value
        if let s = ut.shape[kUpdate].fixedValue {
            rows = const("\(op.name)_rows", .scalar(Int32(s)), scalarInt)
        } else {
            let sh = Op(type: "shape", inputs: [OpInput(name: "x", operands: [.value(update)])],
                        outputs: [Value(name: ctx.names.fresh("\(op.name)_update_shape"), type: .tensor(.int32, [ut.rank]))])
            let kUpdateConst = const("\(op.name)_update_axis", .scalar(Int32(kUpdate)), scalarInt)
            let g = Op(type: "gather", inputs: [OpInput(name: "x", operands: [.value(sh.outputs[0])]), OpInput(name: "indices", operands: [.value(kUpdateConst)]),
                                                OpInput(name: "axis", operands: [.value(zero)])],
                       outputs: [Value(name: ctx.names.fresh("\(op.name)_rows"), type: .tensor(scalarInt))])
            newOps += [sh, g]
            rows = g.outputs[0]
        }
        let windowDim = ut.shape[kUpdate].fixedValue.map { Dim.fixed($0) } ?? .unknown
        let range = Op(type: "range_1d", inputs: [OpInput(name: "end", operands: [.value(rows)]), OpInput(name: "start", operands: [.value(zero)]),
                                                  OpInput(name: "step", operands: [.value(one)])],
                       outputs: [Value(name: ctx.names.fresh("\(op.name)_window"), type: .tensor(TensorType(.int32, [windowDim])))])
        let idx = Op(type: "add", inputs: [OpInput(name: "x", operands: [.value(range.outputs[0])]), OpInput(name: "y", operands: [.value(offset)])],
                     outputs: [Value(name: ctx.names.fresh("\(op.name)_indices"), type: .tensor(TensorType(.int32, [windowDim])))])
        let mode = const("\(op.name)_mode", Tensor(dtype: .string, shape: [], data: .string(["update"])), TensorType(.string, []))
        let validate = const("\(op.name)_validate_indices", Tensor(shape: [], bools: [false]), TensorType(.bool, []))
        newOps += [range, idx]
        let out = op.outputs[0]
        // The tensor scattered into: x, or the constant window of x around the written axis.
        var data = x
        var windowBegin: Value?, windowEnd: Value?, squeeze: Value?
        if partial {
            let wb = window.map { Int32($0.begin) }, we = window.map { Int32($0.end) }
            windowBegin = const("\(op.name)_window_begin", Tensor(.int32, shape: [r], ints: wb), TensorType(.int32, fixed: [r]))
            windowEnd = const("\(op.name)_window_end", Tensor(.int32, shape: [r], ints: we), TensorType(.int32, fixed: [r]))
            squeeze = const("\(op.name)_window_squeeze", Tensor(shape: [r], bools: sm), TensorType(.bool, fixed: [r]))
            var subShape: [Int] = []
            for a in 0..<r where !sm[a] { subShape.append(window[a].end - window[a].begin) }
            let sub = Op(type: "slice_by_index",
                         inputs: [OpInput(name: "x", operands: [.value(x)]), OpInput(name: "begin", operands: [.value(windowBegin!)]),
                                  OpInput(name: "end", operands: [.value(windowEnd!)]), OpInput(name: "squeeze_mask", operands: [.value(squeeze!)])],
                         outputs: [Value(name: ctx.names.fresh("\(op.name)_window_old"), type: .tensor(TensorType(xt.dtype, fixed: subShape)))])
            newOps.append(sub)
            data = sub.outputs[0]
        }
        let scatterAxis = partial ? const("\(op.name)_window_axis", .scalar(Int32(kUpdate)), scalarInt) : kConst
        let scatter = Op(type: "scatter",
                         inputs: [OpInput(name: "data", operands: [.value(data)]), OpInput(name: "indices", operands: [.value(idx.outputs[0])]),
                                  OpInput(name: "updates", operands: [.value(update)]), OpInput(name: "axis", operands: [.value(scatterAxis)]),
                                  OpInput(name: "mode", operands: [.value(mode)]), OpInput(name: "validate_indices", operands: [.value(validate)])],
                         outputs: [Value(name: partial ? ctx.names.fresh("\(op.name)_window_new") : out.name + "_scatter", type: partial ? data.type : out.type)],
                         attributes: [Attribute(name: "name", value: .string(partial ? ctx.names.fresh("\(op.name)_window_scatter") : op.name))])
        newOps.append(scatter)
        var result = scatter
        if partial {
            // Written back with constant bounds: a static slice_update.
            let back = Op(type: "slice_update",
                          inputs: [OpInput(name: "x", operands: [.value(x)]), OpInput(name: "update", operands: [.value(scatter.outputs[0])]),
                                   OpInput(name: "begin", operands: [.value(windowBegin!)]), OpInput(name: "end", operands: [.value(windowEnd!)]),
                                   OpInput(name: "squeeze_mask", operands: [.value(squeeze!)])],
                          outputs: [Value(name: out.name + "_scatter", type: out.type)],
                          attributes: [Attribute(name: "name", value: .string(op.name))])
            newOps.append(back)
            result = back
        }
        for n in newOps where n.attribute("name") == nil {
            n.attributes.append(Attribute(name: "name", value: .string(n.outputs[0].name)))
        }
        for n in newOps { ctx.insert(n, before: op) }
        ctx.replaceAllUses(of: out, with: result.outputs[0])
        ctx.erase(op)
        result.outputs[0].name = out.name
        return true
    }
}
