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
public struct LowerSliceUpdate: PatternPass {
    public static let info = PassInfo("lower_slice_update", "Rewrite slice writes with a run-time end index into a static-window scatter.")
    public static let statistic = "slice writes lowered"
    public init() {}

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

    /// A `slice_update` the pattern lowers: everything it needs, read off the op.
    struct Write {
        let x: Value, xt: TensorType, shape: [Int]
        let update: Value, ut: TensorType
        let begin: Value
        /// The axis written at a run-time offset, and its index among the update's axes.
        let axis: Int, updateAxis: Int
        /// Per axis of `x`: the constant window (the whole axis for `axis`).
        let window: [(begin: Int, end: Int)]
        /// Some other axis is cut (a constant window or a squeezed index).
        let partial: Bool
        let squeezeMask: [Bool]
    }

    public static func pattern(_ op: Op, _ ctx: RewriteContext) throws -> Bool {
        guard let w = write(op) else { return false }
        var e = Emitter(op: op, ctx: ctx)
        let scalarInt = TensorType(.int32, [])
        let kConst = e.const("\(op.name)_axis", .scalar(Int32(w.axis)), scalarInt)
        let zero = e.const("\(op.name)_zero", .scalar(Int32(0)), scalarInt)
        let one = e.const("\(op.name)_one", .scalar(Int32(1)), scalarInt)
        guard let offset = e.offset(w, axisConst: kConst, zero: zero) else { return false }
        let rows = e.rows(w, zero: zero)
        let windowDim = w.ut.shape[w.updateAxis].fixedValue.map { Dim.fixed($0) } ?? .unknown
        let range = Op(type: "range_1d", inputs: [OpInput(name: "end", operands: [.value(rows)]), OpInput(name: "start", operands: [.value(zero)]),
                                                  OpInput(name: "step", operands: [.value(one)])],
                       outputs: [Value(name: ctx.names.fresh("\(op.name)_window"), type: .tensor(TensorType(.int32, [windowDim])))])
        let idx = Op(type: "add", inputs: [OpInput(name: "x", operands: [.value(range.outputs[0])]), OpInput(name: "y", operands: [.value(offset)])],
                     outputs: [Value(name: ctx.names.fresh("\(op.name)_indices"), type: .tensor(TensorType(.int32, [windowDim])))])
        let mode = e.const("\(op.name)_mode", Tensor(dtype: .string, shape: [], data: .string(["update"])), TensorType(.string, []))
        let validate = e.const("\(op.name)_validate_indices", Tensor(shape: [], bools: [false]), TensorType(.bool, []))
        e.ops += [range, idx]
        let result = e.scatter(w, indices: idx.outputs[0], axisConst: kConst, mode: mode, validate: validate)
        for n in e.ops where n.attribute("name") == nil {
            n.attributes.append(Attribute(name: "name", value: .string(n.outputs[0].name)))
        }
        let out = op.outputs[0]
        for n in e.ops { ctx.insert(n, before: op) }
        ctx.replaceAllUses(of: out, with: result.outputs[0])
        ctx.erase(op)
        result.outputs[0].name = out.name
        return true
    }

    /// The write `op` describes when it is a `slice_update` with a run-time bound on one axis
    /// (unit strides; every other axis whole, a constant window or a squeezed constant index).
    static func write(_ op: Op) -> Write? {
        guard op.type == "slice_update",
              let x = op.operand("x")?.value, let xt = x.type.tensorType, let shape = xt.fixedShape,
              let update = op.operand("update")?.value, let ut = update.type.tensorType,
              let begin = op.operand("begin")?.value, let end = op.operand("end")?.value,
              constTensor(end) == nil || constTensor(begin) == nil  // a bound computed at run time
        else { return nil }
        let r = shape.count
        if let stride = op.operand("stride") {
            guard let s = constTensor(stride)?.ints, s.allSatisfy({ $0 == 1 }) else { return nil }
        }
        let squeezeMask = op.operand("squeeze_mask").map { constTensor($0)?.bools } ?? [Bool](repeating: false, count: r)
        let beginMask = op.operand("begin_mask").map { constTensor($0)?.bools } ?? [Bool](repeating: false, count: r)
        let endMask = op.operand("end_mask").map { constTensor($0)?.bools } ?? [Bool](repeating: false, count: r)
        guard let bm = beginMask, let em = endMask, let sm = squeezeMask, bm.count == r, em.count == r, sm.count == r,
              ut.rank == r - sm.filter({ $0 }).count else { return nil }
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
                guard case var .constant(c) = b else { return nil }
                if c < 0 { c += shape[a] }
                guard c >= 0, c < shape[a] else { return nil }
                window.append((c, c + 1)); partial = true
                continue
            }
            defer { updateAxis += 1 }
            if case var .constant(bv) = b, case var .constant(ev) = e {
                if em[a] { ev = shape[a] }
                if bv < 0 { bv += shape[a] }
                if ev < 0 { ev += shape[a] }
                guard bv >= 0, ev <= shape[a], ev > bv else { return nil }
                if bv != 0 || ev != shape[a] { partial = true }
                guard ut.shape[updateAxis].fixedValue.map({ $0 == ev - bv }) ?? true else { return nil }
                window.append((bv, ev))
                continue
            }
            guard axis == nil else { return nil }
            axis = a
            kUpdate = updateAxis
            window.append((0, shape[a]))
        }
        guard let k = axis else { return nil }
        return Write(x: x, xt: xt, shape: shape, update: update, ut: ut, begin: begin, axis: k, updateAxis: kUpdate,
                     window: window, partial: partial, squeezeMask: sm)
    }

    /// The new ops of one rewrite, in insertion order.
    struct Emitter {
        let op: Op
        let ctx: RewriteContext
        var ops: [Op] = []

        init(op: Op, ctx: RewriteContext) {
            self.op = op
            self.ctx = ctx
        }

        mutating func const(_ base: String, _ t: Tensor, _ type: TensorType) -> Value {
            let name = ctx.names.fresh(base)
            let c = Op.const(name, ConstEncoding.constValue(t, type: type)!)
            ops.append(c)
            return c.outputs[0]
        }

        mutating func gather(_ x: Value, _ index: Value, zero: Value, name: String) -> Value {
            let g = Op(type: "gather", inputs: [OpInput(name: "x", operands: [.value(x)]), OpInput(name: "indices", operands: [.value(index)]),
                                                OpInput(name: "axis", operands: [.value(zero)])],
                       outputs: [Value(name: ctx.names.fresh(name), type: .tensor(TensorType(.int32, [])))])
            ops.append(g)
            return g.outputs[0]
        }

        /// begin[axis] as an int32 scalar (nil when `begin` is not int32).
        mutating func offset(_ w: Write, axisConst: Value, zero: Value) -> Value? {
            switch element(w.begin, w.axis) {
            case let .constant(c):
                return const("\(op.name)_begin", .scalar(Int32(c)), TensorType(.int32, []))
            case let .runtime(v, lengthOne) where v.type.tensorType?.dtype == .int32:
                return lengthOne ? gather(v, zero, zero: zero, name: "\(op.name)_begin") : v
            default:
                guard w.begin.type.tensorType?.dtype == .int32 else { return nil }
                return gather(w.begin, axisConst, zero: zero, name: "\(op.name)_begin")
            }
        }

        /// S = update.shape[updateAxis], a constant when the type has it.
        mutating func rows(_ w: Write, zero: Value) -> Value {
            if let s = w.ut.shape[w.updateAxis].fixedValue {
                return const("\(op.name)_rows", .scalar(Int32(s)), TensorType(.int32, []))
            }
            let sh = Op(type: "shape", inputs: [OpInput(name: "x", operands: [.value(w.update)])],
                        outputs: [Value(name: ctx.names.fresh("\(op.name)_update_shape"), type: .tensor(.int32, [w.ut.rank]))])
            let kUpdateConst = const("\(op.name)_update_axis", .scalar(Int32(w.updateAxis)), TensorType(.int32, []))
            ops.append(sh)
            let g = Op(type: "gather", inputs: [OpInput(name: "x", operands: [.value(sh.outputs[0])]), OpInput(name: "indices", operands: [.value(kUpdateConst)]),
                                                OpInput(name: "axis", operands: [.value(zero)])],
                       outputs: [Value(name: ctx.names.fresh("\(op.name)_rows"), type: .tensor(TensorType(.int32, [])))])
            ops.append(g)
            return g.outputs[0]
        }

        /// The scatter into x (or into the constant window of x around the written axis, then
        /// written back with constant bounds); returns the op whose output replaces the write.
        mutating func scatter(_ w: Write, indices: Value, axisConst: Value, mode: Value, validate: Value) -> Op {
            let out = op.outputs[0], r = w.shape.count, sm = w.squeezeMask
            var data = w.x
            var windowBegin: Value?, windowEnd: Value?, squeeze: Value?
            if w.partial {
                let wb = w.window.map { Int32($0.begin) }, we = w.window.map { Int32($0.end) }
                windowBegin = const("\(op.name)_window_begin", Tensor(.int32, shape: [r], ints: wb), TensorType(.int32, fixed: [r]))
                windowEnd = const("\(op.name)_window_end", Tensor(.int32, shape: [r], ints: we), TensorType(.int32, fixed: [r]))
                squeeze = const("\(op.name)_window_squeeze", Tensor(shape: [r], bools: sm), TensorType(.bool, fixed: [r]))
                var subShape: [Int] = []
                for a in 0..<r where !sm[a] { subShape.append(w.window[a].end - w.window[a].begin) }
                let sub = Op(type: "slice_by_index",
                             inputs: [OpInput(name: "x", operands: [.value(w.x)]), OpInput(name: "begin", operands: [.value(windowBegin!)]),
                                      OpInput(name: "end", operands: [.value(windowEnd!)]), OpInput(name: "squeeze_mask", operands: [.value(squeeze!)])],
                             outputs: [Value(name: ctx.names.fresh("\(op.name)_window_old"), type: .tensor(TensorType(w.xt.dtype, fixed: subShape)))])
                ops.append(sub)
                data = sub.outputs[0]
            }
            let scatterAxis = w.partial ? const("\(op.name)_window_axis", .scalar(Int32(w.updateAxis)), TensorType(.int32, [])) : axisConst
            let scatter = Op(type: "scatter",
                             inputs: [OpInput(name: "data", operands: [.value(data)]), OpInput(name: "indices", operands: [.value(indices)]),
                                      OpInput(name: "updates", operands: [.value(w.update)]), OpInput(name: "axis", operands: [.value(scatterAxis)]),
                                      OpInput(name: "mode", operands: [.value(mode)]), OpInput(name: "validate_indices", operands: [.value(validate)])],
                             outputs: [Value(name: w.partial ? ctx.names.fresh("\(op.name)_window_new") : out.name + "_scatter", type: w.partial ? data.type : out.type)],
                             attributes: [Attribute(name: "name", value: .string(w.partial ? ctx.names.fresh("\(op.name)_window_scatter") : op.name))])
            ops.append(scatter)
            guard w.partial else { return scatter }
            // Written back with constant bounds: a static slice_update.
            let back = Op(type: "slice_update",
                          inputs: [OpInput(name: "x", operands: [.value(w.x)]), OpInput(name: "update", operands: [.value(scatter.outputs[0])]),
                                   OpInput(name: "begin", operands: [.value(windowBegin!)]), OpInput(name: "end", operands: [.value(windowEnd!)]),
                                   OpInput(name: "squeeze_mask", operands: [.value(squeeze!)])],
                          outputs: [Value(name: out.name + "_scatter", type: out.type)],
                          attributes: [Attribute(name: "name", value: .string(op.name))])
            ops.append(back)
            return back
        }
    }
}
