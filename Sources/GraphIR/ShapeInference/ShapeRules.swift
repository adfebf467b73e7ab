import GraphIR

/// The type rules of shape inference, keyed by MIL op name (the ops of ``OpRegistry``). An op
/// without a rule keeps the type the file declares (unknown dimensions become opaque).
enum ShapeRules {
    typealias Rule = (inout OpContext) throws -> [SymType]

    static func t(_ dtype: DType, _ shape: [DimExpr]) -> SymType { .tensor(SymTensor(dtype, shape)) }
    static func text(_ s: [DimExpr]) -> String { describeShape(s) }

    static let table: [String: Rule] = {
        var r: [String: Rule] = [:]

        r["const"] = { ctx in
            guard let c = ctx.op.attribute("val") else { throw Unsupported() }
            let ty = ctx.state.symType(c.type, valueName: ctx.op.outputs.first?.name ?? "const")
            ctx.setValue(ContextHelpers.intValue(c))
            return [ty]
        }

        // Elementwise binary with broadcasting; integer values are computed.
        let arith: [String: (DimExpr, DimExpr) -> DimExpr] = [
            "add": (+), "sub": (-), "mul": (*), "floor_div": DimExpr.floorDiv, "mod": DimExpr.mod,
            "maximum": DimExpr.max, "minimum": DimExpr.min,
        ]
        for op in ["add", "sub", "mul", "real_div", "pow", "maximum", "minimum", "floor_div", "mod",
                   "equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
                   "logical_and", "logical_or", "logical_xor"] {
            let isCompare = !["add", "sub", "mul", "real_div", "pow", "maximum", "minimum", "floor_div", "mod"].contains(op)
            let f = arith[op]
            r[op] = { ctx in
                let x = try ctx.tensor("x"), y = try ctx.tensor("y")
                guard let xs = x.shape, let ys = y.shape else { throw Unsupported() }
                let s = try ctx.broadcast([("x", xs), ("y", ys)])
                if let f, x.dtype.isInteger, let vx = ctx.value("x"), let vy = ctx.value("y") {
                    ctx.setValue(combine(vx, vy, op: op, f))
                }
                return [t(isCompare ? .bool : x.dtype, s)]
            }
        }

        // Elementwise unary and activations: same type as x.
        for op in ["abs", "acos", "asin", "atan", "atanh", "ceil", "cos", "cosh", "erf", "exp", "exp2", "floor", "round",
                   "sign", "sin", "sinh", "sqrt", "square", "tan", "tanh", "acosh", "asinh", "logical_not", "rsqrt",
                   "inverse", "log", "clip", "threshold", "relu", "relu6", "sigmoid", "silu", "softplus", "softsign",
                   "gelu", "elu", "leaky_relu", "thresholded_relu", "prelu", "clamped_relu", "sigmoid_hard",
                   "scaled_tanh", "linear_activation", "softplus_parametric", "softmax", "layer_norm", "instance_norm",
                   "batch_norm", "l2_norm", "local_response_norm", "band_part", "cumsum", "reverse"] {
            r[op] = { ctx in [.tensor(try ctx.tensor("x"))] }
        }
        r["identity"] = { ctx in
            if let v = ctx.value("x") { ctx.setValue(v) }
            return [.tensor(try ctx.tensor("x"))]
        }
        r["cast"] = { ctx in
            let x = try ctx.tensor("x")
            guard let name = ctx.string("dtype"), let dt = DType(rawValue: name == "fp64" ? "fp64" : name) else { throw Unsupported() }
            if dt.isInteger, x.dtype.isInteger || x.dtype == .bool, let v = ctx.value("x") {
                try checkFits(v, dt, &ctx)
                ctx.setValue(v)
            }
            return [.tensor(SymTensor(dt, x.shape))]
        }

        // Reductions.
        for op in ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_l1_norm",
                   "reduce_l2_norm", "reduce_log_sum", "reduce_log_sum_exp", "reduce_sum_square"] {
            r[op] = { ctx in
                let x = try ctx.tensor("x")
                guard let s = x.shape else { throw Unsupported() }
                let keep = ctx.bool("keep_dims", default: false)
                var axes: [Int]
                if ctx.has("axes") {
                    guard let a = ctx.constInts("axes") else { throw Unsupported() }
                    axes = try a.map { try ctx.normalizeAxis($0, rank: s.count) }
                } else { axes = Array(0..<s.count) }
                var out: [DimExpr] = []
                for (i, d) in s.enumerated() {
                    if axes.contains(i) { if keep { out.append(1) } } else { out.append(d) }
                }
                return [t(x.dtype, out)]
            }
        }
        for op in ["reduce_argmax", "reduce_argmin"] {
            r[op] = { ctx in
                let s = try ctx.shape("x")
                guard !s.isEmpty else { throw ctx.unknown("\(ctx.op.type) of a rank-0 x") }
                let axis = try ctx.normalizeAxis(ctx.constInt("axis") ?? -1, rank: s.count)
                var out = s
                if ctx.bool("keep_dims", default: false) { out[axis] = 1 } else { out.remove(at: axis) }
                let dt = ctx.string("output_dtype").flatMap { DType(rawValue: $0) } ?? .int32
                return [t(dt, out)]
            }
        }

        // Linear algebra.
        r["linear"] = { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x"), w = try ctx.shape("weight")
            let sh = [("x", text(xs)), ("weight", text(w))]
            guard w.count == 2, !xs.isEmpty else { throw ctx.fail(.shapeError, "linear needs a rank-2 weight and x of rank ≥ 1", sh) }
            try ctx.requireEqual(xs[xs.count - 1], w[1], "x's last dimension must equal weight's input size", sh)
            if let b = try? ctx.shape("bias"), b.count == 1 {
                try ctx.requireEqual(b[0], w[0], "bias length must equal weight's output size", sh + [("bias", text(b))])
            }
            return [t(x.dtype, Array(xs.dropLast()) + [w[0]])]
        }
        r["matmul"] = { ctx in
            let x = try ctx.tensor("x")
            var a = try ctx.shape("x"), b = try ctx.shape("y")
            let sh = [("x", text(a)), ("y", text(b))]
            let tx = ctx.bool("transpose_x", default: false), ty = ctx.bool("transpose_y", default: false)
            var squeezeA = false, squeezeB = false
            guard !a.isEmpty, !b.isEmpty else { throw ctx.fail(.shapeError, "matmul of a rank-0 operand", sh) }
            if a.count == 1 { a = [1] + a; squeezeA = true } else if tx { a.swapAt(a.count - 1, a.count - 2) }
            if b.count == 1 { b = b + [1]; squeezeB = true } else if ty { b.swapAt(b.count - 1, b.count - 2) }
            try ctx.requireEqual(a[a.count - 1], b[b.count - 2], "matmul inner dimensions differ", sh)
            let batch = try ctx.broadcast([("x", Array(a.dropLast(2))), ("y", Array(b.dropLast(2)))])
            var out = batch
            if !squeezeA { out.append(a[a.count - 2]) }
            if !squeezeB { out.append(b[b.count - 1]) }
            return [t(x.dtype, out)]
        }
        r["scaled_dot_product_attention"] = { ctx in
            let q = try ctx.tensor("query")
            let qs = try ctx.shape("query"), k = try ctx.shape("key"), v = try ctx.shape("value")
            let sh = [("query", text(qs)), ("key", text(k)), ("value", text(v))]
            guard qs.count >= 2, k.count >= 2, v.count >= 2 else {
                throw ctx.fail(.shapeError, "scaled_dot_product_attention needs query, key and value of rank ≥ 2", sh)
            }
            try ctx.requireEqual(qs[qs.count - 1], k[k.count - 1], "query and key head sizes differ", sh)
            try ctx.requireEqual(k[k.count - 2], v[v.count - 2], "key and value lengths differ", sh)
            return [t(q.dtype, Array(qs.dropLast()) + [v[v.count - 1]])]
        }

        // Tensor transformations.
        r["reshape"] = { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x")
            let target: [DimExpr]
            if let e = ctx.elements("shape") {
                target = e
            } else {
                guard let n = try ctx.shape("shape").first?.constant else { throw Unsupported() }
                let declared = ctx.op.outputs[0].type.tensorType
                return [t(x.dtype, (0..<n).map { i in
                    if let d = declared, i < d.rank, let f = d.shape[i].fixedValue { return DimExpr(f) }
                    return .opaque("\(ctx.op.outputs[0].name).shape[\(i)]")
                })]
            }
            let total = xs.reduce(DimExpr(1), *)
            var out: [DimExpr] = []
            var inferAt: Int?
            for (i, d) in target.enumerated() {
                if d.constant == -1 {
                    guard inferAt == nil else { throw ctx.fail(.shapeError, "reshape shape has more than one -1", [("x", text(xs)), ("shape", text(target))]) }
                    inferAt = i; out.append(1)
                } else if d.constant == 0 {
                    guard i < xs.count else { throw ctx.fail(.shapeError, "reshape shape[\(i)] = 0 copies an axis x does not have", [("x", text(xs)), ("shape", text(target))]) }
                    out.append(xs[i])
                } else { out.append(d) }
            }
            let sh = [("x", text(xs)), ("shape", text(target))]
            let known = out.reduce(DimExpr(1), *)
            if let i = inferAt {
                if let k = known.constant, k == 0 { throw ctx.fail(.zeroDimension, "reshape with -1 and a zero-sized dimension", sh) }
                let q = DimExpr.floorDiv(total, known)
                if let tc = total.constant, let kc = known.constant, tc % kc != 0 {
                    throw ctx.fail(.shapeError, "\(tc) elements cannot be reshaped to \(text(target)) (not a multiple of \(kc))", sh)
                }
                out[i] = q
            } else if let d = (total - known).constant, d != 0 {
                throw ctx.fail(.shapeError, "reshape changes the element count: \(total) → \(known)", sh)
            }
            for (i, d) in out.enumerated() where d.constant == 0 {
                throw ctx.fail(.zeroDimension, "reshape gives dimension \(i) = 0", sh + [("output", text(out))])
            }
            if let v = ctx.value("x") { ctx.setValue(v) }
            return [t(x.dtype, out)]
        }
        r["transpose"] = { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x")
            guard let perm = ctx.constInts("perm") else { throw Unsupported() }
            guard perm.count == xs.count, Set(perm.map { $0 < 0 ? $0 + xs.count : $0 }) == Set(0..<xs.count) else {
                throw ctx.fail(.shapeError, "perm \(perm) is not a permutation of rank \(xs.count)", [("x", text(xs))])
            }
            return [t(x.dtype, perm.map { xs[$0 < 0 ? $0 + xs.count : $0] })]
        }
        r["expand_dims"] = { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x")
            guard let axes = ctx.constInts("axes") else { throw Unsupported() }
            let rank = xs.count + axes.count
            let norm = try Set(axes.map { try ctx.normalizeAxis($0, rank: rank) })
            guard norm.count == axes.count else {
                throw ctx.fail(.shapeError, "expand_dims axes \(axes) repeat an axis", [("x", text(xs))])
            }
            var out: [DimExpr] = []
            var it = xs.makeIterator()
            for i in 0..<rank {
                if norm.contains(i) { out.append(1) } else if let d = it.next() { out.append(d) } else { throw ctx.unknown("expand_dims axes \(axes)") }
            }
            if let v = ctx.value("x") { ctx.setValue(v) }
            return [t(x.dtype, out)]
        }
        r["squeeze"] = { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x")
            var out: [DimExpr] = []
            if ctx.has("axes") {
                guard let axes = ctx.constInts("axes") else { throw Unsupported() }
                let norm = try Set(axes.map { try ctx.normalizeAxis($0, rank: xs.count) })
                for (i, d) in xs.enumerated() {
                    if norm.contains(i) {
                        if let c = d.constant, c != 1 {
                            throw ctx.fail(.shapeError, "squeeze axis \(i) has size \(c), not 1", [("x", text(xs))])
                        }
                    } else { out.append(d) }
                }
            } else {
                for (i, d) in xs.enumerated() {
                    if d.constant == 1 { continue }
                    if d.constant == nil, !d.symbols.isEmpty {
                        ctx.warn(.squeezeFlexible, "squeeze without axes keeps flexible axis \(i) (\(d)) but drops it when it is 1: the rank changes at \(d) = 1", [("x", text(xs))])
                    }
                    out.append(d)
                }
            }
            if let v = ctx.value("x") { ctx.setValue(v) }
            return [t(x.dtype, out)]
        }
        r["flatten2d"] = { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x")
            let axis = try ctx.normalizeAxis(ctx.constInt("axis") ?? 1, rank: xs.count + 1)
            return [t(x.dtype, [xs[..<axis].reduce(DimExpr(1), *), xs[axis...].reduce(DimExpr(1), *)])]
        }
        r["slice_by_index"] = { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x")
            let sl = try sliceShape(&ctx, xs, write: false)
            if xs.count == 1, !sl.begins.isEmpty, !sl.sizes.isEmpty, let v = ctx.value("x")?.elements(), let b = sl.begins[0].constant, let n = sl.sizes[0].constant,
               let st = sl.strides.first, st > 0, b >= 0, b + (n - 1) * st < v.count {
                ctx.setValue(.elements((0..<n).map { v[b + $0 * st] }))
            }
            return [t(x.dtype, sl.shape)]
        }
        r["slice_by_size"] = { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x")
            guard let begin = ctx.elements("begin"), let size = ctx.elements("size"), begin.count == xs.count, size.count == xs.count else {
                throw Unsupported()
            }
            var out: [DimExpr] = []
            for i in 0..<xs.count {
                let n = size[i].constant == -1 ? xs[i] - begin[i] : size[i]
                if ctx.isConcrete, let nb = begin[i].constant, let nn = n.constant, let d = xs[i].constant, nb + nn > d || nb < 0 {
                    throw ctx.fail(.indexOutOfRange, "axis \(i): slice [\(nb), \(nb + nn)) leaves a dimension of size \(d)", [("x", text(xs))])
                }
                if n.constant == 0 { throw ctx.fail(.zeroDimension, "axis \(i) becomes 0", [("x", text(xs))]) }
                out.append(n)
            }
            return [t(x.dtype, out)]
        }
        r["concat"] = { ctx in
            let ts = try ctx.variadicTensors("values")
            guard let first = ts.first, var s0 = first.shape else { throw Unsupported() }
            guard let axisRaw = ctx.constInt("axis") else { throw Unsupported() }
            var shapes = try ts.map { t -> [DimExpr] in guard let s = t.shape else { throw Unsupported() }; return s }
            // coremltools' frontends concatenate scalars (`concat((1, 2, seq_len, 8))` of a
            // `view` shape): each rank-0 value counts as one element of a 1-D result.
            if shapes.allSatisfy({ $0.count <= 1 }), shapes.contains(where: \.isEmpty) {
                shapes = shapes.map { $0.isEmpty ? [1] : $0 }
                s0 = shapes[0]
            }
            guard !s0.isEmpty else { throw ctx.fail(.shapeError, "concat of rank-0 values") }
            let axis = try ctx.normalizeAxis(axisRaw, rank: s0.count)
            let sh = shapes.enumerated().map { ("values[\($0.offset)]", text($0.element)) }
            var out = s0
            out[axis] = 0
            for s in shapes {
                guard s.count == s0.count else { throw ctx.fail(.shapeError, "concat of tensors of different ranks", sh) }
                for i in 0..<s.count where i != axis {
                    try ctx.requireEqual(s0[i], s[i], "concat: axis \(i) differs", sh)
                }
                out[axis] = out[axis] + s[axis]
            }
            if s0.count <= 1, first.dtype.isInteger {
                var all: [DimExpr] = []
                var ok = true
                for o in ctx.op.input("values")!.operands {
                    if let e = ctx.value(o)?.elements() { all += e } else { ok = false; break }
                }
                if ok { ctx.setValue(.elements(all)) }
            }
            return [t(first.dtype, out)]
        }
        r["stack"] = { ctx in
            let ts = try ctx.variadicTensors("values")
            guard let first = ts.first, let s0 = first.shape, let axisRaw = ctx.constInt("axis") else { throw Unsupported() }
            let axis = try ctx.normalizeAxis(axisRaw, rank: s0.count + 1)
            let sh = ts.enumerated().map { ("values[\($0.offset)]", describeShape($0.element.shape)) }
            for t in ts {
                guard let s = t.shape, s.count == s0.count else { throw ctx.fail(.shapeError, "stack of tensors of different ranks", sh) }
                for i in 0..<s.count { try ctx.requireEqual(s0[i], s[i], "stack: axis \(i) differs", sh) }
            }
            var out = s0
            out.insert(DimExpr(ts.count), at: axis)
            if s0.isEmpty, first.dtype.isInteger {
                let vals = ctx.op.input("values")!.operands.compactMap { ctx.value($0)?.elements()?.first }
                if vals.count == ts.count { ctx.setValue(.elements(vals)) }
            }
            return [t(first.dtype, out)]
        }
        r["split"] = { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x")
            guard let axisRaw = ctx.constInt("axis") else { throw Unsupported() }
            guard !xs.isEmpty else { throw ctx.fail(.shapeError, "split of a rank-0 x") }
            let axis = try ctx.normalizeAxis(axisRaw, rank: xs.count)
            var sizes: [DimExpr]
            if let s = ctx.elements("split_sizes") {
                sizes = s
                let sum = s.reduce(DimExpr(0), +)
                try ctx.requireEqual(sum, xs[axis], "split sizes do not add up to axis \(axis)", [("x", text(xs))])
            } else if let n = ctx.constInt("num_splits") {
                guard n > 0, n <= 4096 else { throw ctx.fail(.shapeError, "split num_splits = \(n)", [("x", text(xs))]) }
                let each = DimExpr.ceilDiv(xs[axis], DimExpr(n))
                sizes = Array(repeating: each, count: n)
                if let d = xs[axis].constant, d % n != 0 {
                    sizes[n - 1] = DimExpr(d - (n - 1) * (d + n - 1) / n)
                }
            } else { throw Unsupported() }
            return sizes.map { s in var o = xs; o[axis] = s; return t(x.dtype, o) }
        }
        r["tile"] = { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x")
            guard let reps = ctx.elements("reps") else { throw Unsupported() }
            guard reps.count == xs.count else {
                throw ctx.fail(.shapeError, "tile reps has \(reps.count) entries for rank \(xs.count)", [("x", text(xs))])
            }
            return [t(x.dtype, zip(xs, reps).map { $0 * $1 })]
        }
        r["pad"] = { ctx in
            let x = try ctx.tensor("x")
            var xs = try ctx.shape("x")
            guard let pad = ctx.elements("pad"), pad.count % 2 == 0, pad.count / 2 <= xs.count else { throw Unsupported() }
            let n = pad.count / 2
            for i in 0..<n { xs[xs.count - n + i] = xs[xs.count - n + i] + pad[2 * i] + pad[2 * i + 1] }
            return [t(x.dtype, xs)]
        }

        // Gather / scatter.
        r["gather"] = { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x"), ind = try ctx.shape("indices")
            guard !xs.isEmpty else { throw ctx.fail(.shapeError, "gather from a rank-0 x", [("x", text(xs)), ("indices", text(ind))]) }
            let axis = try ctx.normalizeAxis(ctx.constInt("axis") ?? 0, rank: xs.count)
            let batch = ctx.constInt("batch_dims") ?? 0
            guard batch >= 0, batch <= ind.count, batch <= axis else {
                throw ctx.fail(.shapeError, "gather batch_dims \(batch) exceeds the ranks (axis \(axis), indices rank \(ind.count))", [("x", text(xs)), ("indices", text(ind))])
            }
            let out = Array(xs[..<axis]) + Array(ind[batch...]) + Array(xs[(axis + 1)...])
            try checkIndices(&ctx, "indices", dim: xs[axis], axis: axis, [("x", text(xs)), ("indices", text(ind))])
            if xs.count == 1, let v = ctx.value("x")?.elements(), let idx = ctx.constInts("indices") {
                var picked: [DimExpr] = []
                for i in idx { let k = i < 0 ? i + v.count : i; if k >= 0 && k < v.count { picked.append(v[k]) } }
                if picked.count == idx.count { ctx.setValue(.elements(picked)) }
            }
            return [t(x.dtype, out)]
        }
        r["gather_along_axis"] = { ctx in
            let x = try ctx.tensor("x")
            return [t(x.dtype, try ctx.shape("indices"))]
        }
        r["gather_nd"] = { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x"), ind = try ctx.shape("indices")
            guard let k = ind.last?.constant else { throw Unsupported() }
            let batch = ctx.constInt("batch_dims") ?? 0
            guard k >= 0, batch >= 0, batch + k <= xs.count else {
                throw ctx.fail(.shapeError, "gather_nd index depth \(k) (batch_dims \(batch)) exceeds the rank of x (\(xs.count))", [("x", text(xs)), ("indices", text(ind))])
            }
            return [t(x.dtype, Array(ind.dropLast()) + Array(xs[(batch + k)...]))]
        }
        r["scatter"] = { ctx in
            let d = try ctx.tensor("data")
            let ds = try ctx.shape("data"), ind = try ctx.shape("indices"), up = try ctx.shape("updates")
            guard !ds.isEmpty else { throw ctx.fail(.shapeError, "scatter into a rank-0 data") }
            let axis = try ctx.normalizeAxis(ctx.constInt("axis") ?? 0, rank: ds.count)
            let sh = [("data", text(ds)), ("indices", text(ind)), ("updates", text(up))]
            let expected = Array(ds[..<axis]) + ind + Array(ds[(axis + 1)...])
            guard expected.count == up.count else {
                throw ctx.fail(.shapeError, "updates must have shape \(text(expected)) (data[:axis] + indices + data[axis+1:])", sh)
            }
            for (i, (a, b)) in zip(expected, up).enumerated() {
                try ctx.requireEqual(a, b, "updates axis \(i) must be \(a)", sh)
            }
            try checkIndices(&ctx, "indices", dim: ds[axis], axis: axis, sh)
            return [.tensor(d)]
        }
        r["scatter_along_axis"] = { ctx in
            let d = try ctx.tensor("data")
            let ind = try ctx.shape("indices"), up = try ctx.shape("updates")
            let sh = [("indices", text(ind)), ("updates", text(up))]
            guard ind.count == up.count else { throw ctx.fail(.shapeError, "indices and updates ranks differ", sh) }
            for (i, (a, b)) in zip(ind, up).enumerated() { try ctx.requireEqual(a, b, "axis \(i) of indices and updates differ", sh) }
            return [.tensor(d)]
        }
        r["scatter_nd"] = { ctx in [.tensor(try ctx.tensor("data"))] }
        r["range_1d"] = { ctx in
            let e = try ctx.tensor("end")
            guard let end = ctx.elements("end")?.first, let start = ctx.elements("start")?.first, let step = ctx.elements("step")?.first else {
                return [t(e.dtype, [.opaque("\(ctx.op.outputs[0].name).shape[0]")])]
            }
            let count: DimExpr
            if step.constant == 1 { count = end - start } else if let s = step.constant, s > 0 { count = DimExpr.ceilDiv(end - start, DimExpr(s)) } else {
                count = .opaque("\(ctx.op.outputs[0].name).shape[0]")
            }
            if let c = count.constant, c <= 0 {
                throw ctx.fail(.zeroDimension, "range_1d(start \(start), end \(end), step \(step)) is empty")
            }
            ctx.setValue(.range(start: start, step: step, count: count))
            return [t(e.dtype, [count])]
        }
        r["shape"] = { ctx in
            let xs = try ctx.shape("x")
            ctx.setValue(.elements(xs))
            return [t(.int32, [DimExpr(xs.count)])]
        }
        r["select"] = { ctx in
            let c = try ctx.shape("cond"), a = try ctx.tensor("a"), b = try ctx.tensor("b")
            guard let as_ = a.shape, let bs = b.shape else { throw Unsupported() }
            return [t(a.dtype, try ctx.broadcast([("cond", c), ("a", as_), ("b", bs)]))]
        }
        r["fill"] = { ctx in
            guard let s = ctx.elements("shape") else { throw Unsupported() }
            let dt = (try? ctx.tensor("value"))?.dtype ?? .fp32
            return [t(dt, s)]
        }
        r["fill_like"] = { ctx in
            let s = try ctx.shape("ref_tensor")
            let dt = (try? ctx.tensor("value"))?.dtype ?? .fp32
            return [t(dt, s)]
        }
        r["argsort"] = { ctx in [t(.int32, try ctx.shape("x"))] }
        r["topk"] = { ctx in
            let x = try ctx.tensor("x")
            var xs = try ctx.shape("x")
            guard !xs.isEmpty else { throw ctx.fail(.shapeError, "topk of a rank-0 x") }
            let axis = try ctx.normalizeAxis(ctx.constInt("axis") ?? -1, rank: xs.count)
            xs[axis] = ctx.elements("k")?.first ?? 1
            let idt = ctx.string("output_indices_dtype").flatMap { DType(rawValue: $0) } ?? .int32
            return [t(x.dtype, xs), t(idt, xs)]
        }
        r["one_hot"] = { ctx in
            var s = try ctx.shape("indices")
            guard let n = ctx.elements("one_hot_vector_size")?.first else { throw Unsupported() }
            let axis = try ctx.normalizeAxis(ctx.constInt("axis") ?? -1, rank: s.count + 1)
            s.insert(n, at: axis)
            let dt = (try? ctx.tensor("on_value"))?.dtype ?? .fp32
            return [t(dt, s)]
        }
        r["dequantize"] = { ctx in
            let s = try ctx.shape("input")
            let dt = (try? ctx.tensor("scale"))?.dtype ?? .fp32
            return [t(dt, s)]
        }
        r["quantize"] = { ctx in
            let s = try ctx.shape("input")
            guard let dt = ctx.string("output_dtype").flatMap({ DType(rawValue: $0) }) else { throw Unsupported() }
            return [t(dt, s)]
        }

        // States.
        r["read_state"] = { ctx in
            guard let o = ctx.operand("input"), let st = ctx.symType(o).stateTensor else { throw Unsupported() }
            return [.tensor(st)]
        }
        r["write_state"] = { ctx in
            guard let o = ctx.operand("input"), let st = ctx.symType(o).stateTensor, let ss = st.shape else { throw Unsupported() }
            let d = try ctx.tensor("data")
            guard let ds = d.shape else { throw Unsupported() }
            let sh = [("state", text(ss)), ("data", text(ds))]
            guard ds.count == ss.count else { throw ctx.fail(.shapeError, "written data has rank \(ds.count), the state rank \(ss.count)", sh) }
            for (i, (a, b)) in zip(ss, ds).enumerated() { try ctx.requireEqual(a, b, "written data axis \(i) differs from the state", sh) }
            if d.dtype != st.dtype { throw ctx.fail(.shapeError, "written data is \(d.dtype.rawValue), the state \(st.dtype.rawValue)", sh) }
            return []
        }
        r["coreml_update_state"] = { ctx in
            guard let o = ctx.operand("state"), let st = ctx.symType(o).stateTensor else { throw Unsupported() }
            return [.tensor(st)]
        }
        r["slice_update"] = { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x"), up = try ctx.shape("update")
            for name in ["begin", "end"] {
                if let n = try? ctx.shape(name), n.count == 1, let c = n[0].constant, c != xs.count {
                    throw ctx.fail(.sliceUpdateRank, "\(name) has \(c) entries but x has rank \(xs.count)", [("x", text(xs)), (name, text(n))])
                }
            }
            let sl = try sliceShape(&ctx, xs, write: true)
            let sh = [("x", text(xs)), ("update", text(up)), ("slice", text(sl.shape))]
            guard sl.shape.count == up.count else {
                throw ctx.fail(.shapeError, "update has rank \(up.count), the selected slice \(text(sl.shape))", sh)
            }
            for (i, (a, b)) in zip(sl.shape, up).enumerated() {
                try ctx.requireEqual(a, b, "update axis \(i) must match the selected slice", sh)
            }
            return [.tensor(x)]
        }
        addOpsetRules(&r)
        return r
    }()

    // MARK: - helpers

    /// Elementwise integer arithmetic on tracked values (with scalar broadcasting).
    static func combine(_ a: SymValue, _ b: SymValue, op: String, _ f: (DimExpr, DimExpr) -> DimExpr) -> SymValue? {
        switch (a, b) {
        case let (.elements(x), .elements(y)):
            if x.count == y.count { return .elements(zip(x, y).map(f)) }
            if x.count == 1 { return .elements(y.map { f(x[0], $0) }) }
            if y.count == 1 { return .elements(x.map { f($0, y[0]) }) }
            return nil
        case let (.range(s, st, n), .elements(y)) where y.count == 1:
            switch op {
            case "add": return .range(start: s + y[0], step: st, count: n)
            case "sub": return .range(start: s - y[0], step: st, count: n)
            case "mul": return .range(start: s * y[0], step: st * y[0], count: n)
            default: return nil
            }
        case let (.elements(x), .range(s, st, n)) where x.count == 1:
            switch op {
            case "add": return .range(start: x[0] + s, step: st, count: n)
            case "mul": return .range(start: x[0] * s, step: x[0] * st, count: n)
            default: return nil
            }
        default:
            return nil
        }
    }

    /// Integer ranges of the narrow dtypes.
    static func limits(_ dt: DType) -> ClosedRange<Int>? {
        switch dt {
        case .int8: return -128...127
        case .uint8: return 0...255
        case .int16: return -32768...32767
        case .uint16: return 0...65535
        case .int32: return Int(Int32.min)...Int(Int32.max)
        default: return nil
        }
    }

    /// A cast of tracked values (lengths, shapes) into a dtype that cannot hold them.
    static func checkFits(_ v: SymValue, _ dt: DType, _ ctx: inout OpContext) throws {
        guard let lim = limits(dt) else { return }
        let elems: [DimExpr]
        switch v {
        case let .elements(e): elems = e
        case let .range(s, st, n): elems = [s, s + st * (n - 1)]
        }
        for e in elems {
            if let c = e.constant, !lim.contains(c) {
                throw ctx.fail(.castOverflow, "value \(c) does not fit \(dt.rawValue) (\(lim.lowerBound)...\(lim.upperBound)); it wraps",
                               [("x", v.description)])
            }
        }
    }

    /// Index values against a dimension: a constant index or a range window that leaves it.
    static func checkIndices(_ ctx: inout OpContext, _ name: String, dim: DimExpr, axis: Int, _ shapes: [(String, String)]) throws {
        guard let v = ctx.value(name), let d = dim.constant else { return }
        switch v {
        case let .range(start, step, count):
            guard step.constant == 1, let n = count.constant else { return }
            if n > d {
                throw ctx.fail(.indexOutOfRange, "a window of \(n) indices along axis \(axis) cannot fit a dimension of \(d) at any offset", shapes)
            }
            if let s = start.constant, s < 0 || s &+ n > d {
                throw ctx.fail(.indexOutOfRange, "indices [\(s), \(s + n)) leave axis \(axis) of size \(d)", shapes)
            }
        case let .elements(e):
            for x in e {
                if let c = x.constant, c >= d || c < -d {
                    throw ctx.fail(.indexOutOfRange, "index \(c) is out of range for axis \(axis) of size \(d)", shapes)
                }
            }
        }
    }

    struct Slice {
        var shape: [DimExpr]
        var begins: [DimExpr]
        var sizes: [DimExpr]
        var strides: [Int]
    }

    /// The shape `slice_by_index` / `slice_update` select (begin/end/stride/masks).
    static func sliceShape(_ ctx: inout OpContext, _ xs: [DimExpr], write: Bool) throws -> Slice {
        let r = xs.count
        guard let begin = ctx.elements("begin"), let end = ctx.elements("end") else {
            // Unknown bounds: the rank is known, the sizes are not.
            if write { throw ctx.unknown("slice_update bounds computed from values shape inference does not track") }
            let declared = ctx.op.outputs[0].type.tensorType
            guard let d = declared else { throw Unsupported() }
            let shape = d.shape.enumerated().map { i, dim -> DimExpr in
                dim.fixedValue.map { DimExpr($0) } ?? .opaque("\(ctx.op.outputs[0].name).shape[\(i)]")
            }
            return Slice(shape: shape, begins: [], sizes: [], strides: [])
        }
        let sh = [("x", text(xs)), ("begin", text(begin)), ("end", text(end))]
        guard begin.count == r, end.count == r else {
            throw ctx.fail(write ? .sliceUpdateRank : .shapeError, "begin/end have \(begin.count)/\(end.count) entries for rank \(r)", sh)
        }
        let stride = ctx.constInts("stride") ?? Array(repeating: 1, count: r)
        let bm = ctx.bools("begin_mask") ?? Array(repeating: false, count: r)
        let em = ctx.bools("end_mask") ?? Array(repeating: false, count: r)
        let sm = ctx.bools("squeeze_mask") ?? Array(repeating: false, count: r)
        guard stride.count == r, bm.count == r, em.count == r, sm.count == r else {
            throw ctx.fail(.shapeError, "stride/masks do not have \(r) entries", sh)
        }
        var shape: [DimExpr] = []
        var begins: [DimExpr] = []
        var sizes: [DimExpr] = []
        for i in 0..<r {
            let d = xs[i]
            let s = stride[i]
            guard s != 0 else { throw ctx.fail(.shapeError, "stride 0 on axis \(i)", sh) }
            func norm(_ e: DimExpr) -> DimExpr { if let c = e.constant, c < 0 { return d + DimExpr(c) } else { return e } }
            if sm[i] {
                let b = bm[i] ? DimExpr(0) : norm(begin[i])
                if let bc = b.constant, let dc = d.constant, bc < 0 || bc >= dc {
                    throw ctx.fail(.indexOutOfRange, "axis \(i): index \(begin[i]) is out of range for size \(dc)", sh)
                }
                begins.append(b); sizes.append(1)
                continue
            }
            var size: DimExpr
            var b: DimExpr
            if s > 0 {
                b = bm[i] ? 0 : norm(begin[i])
                var e = em[i] ? d : norm(end[i])
                if write, let ec = e.constant, let dc = d.constant, ec > dc || (b.constant ?? 0) < 0 {
                    throw ctx.fail(.indexOutOfRange, "axis \(i): the write [\(b), \(ec)) leaves a dimension of size \(dc)", sh)
                }
                if let ec = e.constant, let dc = d.constant { e = DimExpr(Swift.min(Swift.max(ec, 0), dc)) }
                if let bc = b.constant, let dc = d.constant { b = DimExpr(Swift.min(Swift.max(bc, 0), dc)) }
                let diff = e - b
                if let dc = diff.constant { size = DimExpr(Swift.max(0, (dc &+ s &- 1) / s)) } else { size = s == 1 ? diff : DimExpr.ceilDiv(diff, DimExpr(s)) }
            } else {
                guard let dc = d.constant else {
                    begins.append(.opaque("begin")); sizes.append(.opaque("size"))
                    shape.append(.opaque("\(ctx.op.outputs[0].name).shape[\(i)]")); continue
                }
                let bb = bm[i] ? dc - 1 : (begin[i].constant.map { $0 < 0 ? $0 + dc : $0 } ?? dc - 1)
                let ee = em[i] ? -1 : (end[i].constant.map { $0 < 0 ? $0 + dc : $0 } ?? -1)
                b = DimExpr(bb)
                size = DimExpr(Swift.max(0, (bb &- ee &- s &- 1) / (0 &- s)))
            }
            if size.constant == 0 {
                throw ctx.fail(.zeroDimension, "axis \(i) of the slice is empty (size 0)", sh)
            }
            begins.append(b); sizes.append(size)
            shape.append(size)
        }
        return Slice(shape: shape, begins: begins, sizes: sizes, strides: stride)
    }
}
