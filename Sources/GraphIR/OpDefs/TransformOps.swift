/// Tensor transformations (MIL `tensor_transformation`, `tensor_operation`'s `concat`/`split`/
/// `tile`/`pad`): schemas and shape rules. Kernels: `Interpreter/ShapeKernels.swift`,
/// `ShapeKernels+Space.swift`.
extension OpDefs {
    static func declareTransforms(_ b: inout OpTableBuilder) {
        b.family = .transform
        declareReshapes(&b)
        declareAxisMoves(&b)
        declareSlices(&b)
        declareJoinsAndSplits(&b)
        declareSpaceMoves(&b)
    }

    /// `reshape`, `reshape_like`: the elements stay in order, the shape changes.
    static func declareReshapes(_ b: inout OpTableBuilder) {
        b.add(OpSchema("reshape", [x(), req("shape", .integer)])) { ctx in
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
                    guard inferAt == nil else { throw ctx.fail(.shapeError, "reshape shape has more than one -1", [("x", text(xs)), ("shape", value(target))]) }
                    inferAt = i; out.append(1)
                } else if d.constant == 0 {
                    guard i < xs.count else { throw ctx.fail(.shapeError, "reshape shape[\(i)] = 0 copies an axis x does not have", [("x", text(xs)), ("shape", value(target))]) }
                    out.append(xs[i])
                } else { out.append(d) }
            }
            let sh = [("x", text(xs)), ("shape", value(target))]
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
        b.add(OpSchema("reshape_like", [x(), InputSpec("ref_tensors", variadic: true), InputSpec("begins", .integer, variadic: true),
                                       InputSpec("ends", .integer, variadic: true), InputSpec("end_masks", .bool, variadic: true)]),
              declaredTypeOnly: "no symbolic rule yet: the declared type is used")
    }

    /// `transpose`, `expand_dims`, `squeeze`, `flatten2d`, `reverse`: axes move, appear or go.
    static func declareAxisMoves(_ b: inout OpTableBuilder) {
        b.add(OpSchema("transpose", [x(), req("perm", .integer)])) { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x")
            guard let perm = ctx.constInts("perm") else { throw Unsupported() }
            guard perm.count == xs.count, Set(perm.map { $0 < 0 ? $0 + xs.count : $0 }) == Set(0..<xs.count) else {
                throw ctx.fail(.shapeError, "perm \(perm) is not a permutation of rank \(xs.count)", [("x", text(xs))])
            }
            return [t(x.dtype, perm.map { xs[$0 < 0 ? $0 + xs.count : $0] })]
        }
        b.add(OpSchema("expand_dims", [x(), req("axes", .integer)])) { ctx in
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
        b.add(OpSchema("squeeze", [x(), opt("axes", .integer)])) { ctx in
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
        b.add(OpSchema("flatten2d", [x(), opt("axis", .integer)])) { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x")
            let axis = try ctx.normalizeAxis(ctx.constInt("axis") ?? 1, rank: xs.count + 1)
            return [t(x.dtype, [xs[..<axis].reduce(DimExpr(1), *), xs[axis...].reduce(DimExpr(1), *)])]
        }
        b.add(OpSchema("reverse", [x(), opt("axes", .integer)]), rule: sameAsX)
    }

    /// `slice_by_index`, `slice_by_size`: a strided window of x.
    static func declareSlices(_ b: inout OpTableBuilder) {
        b.add(OpSchema("slice_by_index", [x(), req("begin", .integer), req("end", .integer), opt("stride", .integer),
                                        opt("begin_mask", .bool), opt("end_mask", .bool), opt("squeeze_mask", .bool)])) { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x")
            let sl = try sliceShape(&ctx, xs, write: false)
            if xs.count == 1, !sl.begins.isEmpty, !sl.sizes.isEmpty, let v = ctx.value("x")?.elements(), let b = sl.begins[0].constant, let n = sl.sizes[0].constant,
               let st = sl.strides.first, st > 0, b >= 0, b + (n - 1) * st < v.count {
                ctx.setValue(.elements((0..<n).map { v[b + $0 * st] }))
            }
            return [t(x.dtype, sl.shape)]
        }
        b.add(OpSchema("slice_by_size", [x(), req("begin", .integer), req("size", .integer)])) { ctx in
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
    }

    /// `concat`, `stack`, `split`, `tile`, `pad`.
    static func declareJoinsAndSplits(_ b: inout OpTableBuilder) {
        b.add(OpSchema("concat", [InputSpec("values", variadic: true), req("axis", .integer), opt("interleave", .bool)])) { ctx in
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
        b.add(OpSchema("stack", [InputSpec("values", variadic: true), req("axis", .integer)])) { ctx in
            let ts = try ctx.variadicTensors("values")
            guard let first = ts.first, let s0 = first.shape, let axisRaw = ctx.constInt("axis") else { throw Unsupported() }
            let axis = try ctx.normalizeAxis(axisRaw, rank: s0.count + 1)
            let sh = ts.enumerated().map { ("values[\($0.offset)]", IssueShape(shape: $0.element.shape)) }
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
        b.add(OpSchema("split", [x(), opt("num_splits", .integer), opt("split_sizes", .integer), req("axis", .integer)])) { ctx in
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
        b.add(OpSchema("tile", [x(), req("reps", .integer)])) { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x")
            guard let reps = ctx.elements("reps") else { throw Unsupported() }
            guard reps.count == xs.count else {
                throw ctx.fail(.shapeError, "tile reps has \(reps.count) entries for rank \(xs.count)", [("x", text(xs))])
            }
            return [t(x.dtype, zip(xs, reps).map { $0 * $1 })]
        }
        b.add(OpSchema("pad", [x(), req("pad", .integer), opt("mode", .string), opt("constant_val")])) { ctx in
            let x = try ctx.tensor("x")
            var xs = try ctx.shape("x")
            guard let pad = ctx.elements("pad"), pad.count % 2 == 0, pad.count / 2 <= xs.count else { throw Unsupported() }
            let n = pad.count / 2
            for i in 0..<n { xs[xs.count - n + i] = xs[xs.count - n + i] + pad[2 * i] + pad[2 * i + 1] }
            return [t(x.dtype, xs)]
        }
    }

    /// Moves between space, depth and batch (`depth_to_space` … `batch_to_space`), `reverse_sequence`, `sliding_windows`.
    static func declareSpaceMoves(_ b: inout OpTableBuilder) {
        b.add(OpSchema("depth_to_space", [x(), req("block_size", .integer)]),
              declaredTypeOnly: "no symbolic rule yet: the declared type is used")
        b.add(OpSchema("space_to_depth", [x(), req("block_size", .integer)]),
              declaredTypeOnly: "no symbolic rule yet: the declared type is used")
        b.add(OpSchema("pixel_shuffle", [x(), req("upscale_factor", .integer)]),
              declaredTypeOnly: "no symbolic rule yet: the declared type is used")
        b.add(OpSchema("pixel_unshuffle", [x(), req("downscale_factor", .integer)])) { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x")
            guard xs.count == 4, let f = ctx.constInt("downscale_factor"), f >= 1 else { throw Unsupported() }
            return [t(x.dtype, [xs[0], xs[1] * DimExpr(f * f), DimExpr.floorDiv(xs[2], DimExpr(f)), DimExpr.floorDiv(xs[3], DimExpr(f))])]
        }
        b.add(OpSchema("space_to_batch", [x(), req("block_shape", .integer), req("paddings", .integer)])) { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x")
            guard xs.count == 4, let b = ctx.constInts("block_shape"), let p = ctx.constInts("paddings"), b.count == 2, p.count == 4, b.allSatisfy({ $0 >= 1 }) else { throw Unsupported() }
            return [t(x.dtype, [xs[0] * DimExpr(b[0] * b[1]), xs[1], DimExpr.floorDiv(xs[2] + DimExpr(p[0] + p[1]), DimExpr(b[0])),
                                DimExpr.floorDiv(xs[3] + DimExpr(p[2] + p[3]), DimExpr(b[1]))])]
        }
        b.add(OpSchema("batch_to_space", [x(), req("block_shape", .integer), req("crops", .integer)])) { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x")
            guard xs.count == 4, let b = ctx.constInts("block_shape"), let c = ctx.constInts("crops"), b.count == 2, c.count == 4, b.allSatisfy({ $0 >= 1 }) else { throw Unsupported() }
            return [t(x.dtype, [DimExpr.floorDiv(xs[0], DimExpr(b[0] * b[1])), xs[1], xs[2] * DimExpr(b[0]) - DimExpr(c[0] + c[1]),
                                xs[3] * DimExpr(b[1]) - DimExpr(c[2] + c[3])])]
        }
        b.add(OpSchema("reverse_sequence", [x(), req("lengths", .integer), opt("seq_axis", .integer), opt("batch_axis", .integer)])) { ctx in [.tensor(try ctx.tensor("x"))] }
        b.add(OpSchema("sliding_windows", [x(), req("axis", .integer), req("size", .integer), opt("stride", .integer)]),
              declaredTypeOnly: "no symbolic rule yet: the declared type is used")
    }
}
