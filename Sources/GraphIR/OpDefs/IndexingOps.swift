/// Gather / scatter and the index-producing ops (MIL `scatter_gather`, `tensor_operation`):
/// schemas and shape rules. Kernels: `Interpreter/IndexKernels.swift`, `DetectionKernels.swift`.
extension OpDefs {
    static func declareIndexing(_ b: inout OpTableBuilder) {
        b.family = .indexing
        declareGatherScatter(&b)
        declareIndexProducers(&b)
    }

    /// `gather*` and `scatter*`: reads and writes at index tensors.
    static func declareGatherScatter(_ b: inout OpTableBuilder) {
        b.add(OpSchema("gather", [x(), req("indices", .integer), opt("axis", .integer), opt("batch_dims", .integer), opt("validate_indices", .bool)],
                     compressedInputs: ["x"], halfViewInputs: ["x"])) { ctx in
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
        b.add(OpSchema("gather_along_axis", [x(), req("indices", .integer), opt("axis", .integer), opt("validate_indices", .bool)])) { ctx in
            let x = try ctx.tensor("x")
            return [t(x.dtype, try ctx.shape("indices"))]
        }
        b.add(OpSchema("gather_nd", [x(), req("indices", .integer), opt("batch_dims", .integer), opt("validate_indices", .bool)])) { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x"), ind = try ctx.shape("indices")
            guard let k = ind.last?.constant else { throw Unsupported() }
            let batch = ctx.constInt("batch_dims") ?? 0
            guard k >= 0, batch >= 0, batch + k <= xs.count else {
                throw ctx.fail(.shapeError, "gather_nd index depth \(k) (batch_dims \(batch)) exceeds the rank of x (\(xs.count))", [("x", text(xs)), ("indices", text(ind))])
            }
            return [t(x.dtype, Array(ind.dropLast()) + Array(xs[(batch + k)...]))]
        }
        b.add(OpSchema("scatter", scatterInputs)) { ctx in
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
        b.add(OpSchema("scatter_along_axis", scatterInputs)) { ctx in
            let d = try ctx.tensor("data")
            let ind = try ctx.shape("indices"), up = try ctx.shape("updates")
            let sh = [("indices", text(ind)), ("updates", text(up))]
            guard ind.count == up.count else { throw ctx.fail(.shapeError, "indices and updates ranks differ", sh) }
            for (i, (a, b)) in zip(ind, up).enumerated() { try ctx.requireEqual(a, b, "axis \(i) of indices and updates differ", sh) }
            return [.tensor(d)]
        }
        b.add(OpSchema("scatter_nd", [req("data"), req("indices", .integer), req("updates"), opt("mode", .string), opt("validate_indices", .bool)])) { ctx in [.tensor(try ctx.tensor("data"))] }
    }

    /// Ops that make or select index tensors: `range_1d`, `shape`, `select`, `fill`, `band_part`, `cumsum`, `topk`, `argsort`, `one_hot`, `non_zero`, `non_maximum_suppression`, `classify`.
    static func declareIndexProducers(_ b: inout OpTableBuilder) {
        b.add(OpSchema("range_1d", [req("end", .numeric), req("start", .numeric), req("step", .numeric)])) { ctx in
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
        b.add(OpSchema("shape", [x()])) { ctx in
            let xs = try ctx.shape("x")
            ctx.setValue(.elements(xs))
            return [t(.int32, [DimExpr(xs.count)])]
        }
        b.add(OpSchema("select", [req("cond"), req("a"), req("b")])) { ctx in
            let c = try ctx.shape("cond"), a = try ctx.tensor("a"), b = try ctx.tensor("b")
            guard let as_ = a.shape, let bs = b.shape else { throw Unsupported() }
            return [t(a.dtype, try ctx.broadcast([("cond", c), ("a", as_), ("b", bs)]))]
        }
        b.add(OpSchema("fill", [req("shape", .integer), opt("value")])) { ctx in
            guard let s = ctx.elements("shape") else { throw Unsupported() }
            let dt = (try? ctx.tensor("value"))?.dtype ?? .fp32
            return [t(dt, s)]
        }
        b.add(OpSchema("fill_like", [req("ref_tensor"), opt("value")])) { ctx in
            let s = try ctx.shape("ref_tensor")
            let dt = (try? ctx.tensor("value"))?.dtype ?? .fp32
            return [t(dt, s)]
        }
        b.add(OpSchema("band_part", [x(), opt("lower", .integer), opt("upper", .integer)]), rule: sameAsX)
        b.add(OpSchema("cumsum", [x(.numeric), opt("axis", .integer), opt("exclusive", .bool), opt("reverse", .bool)]), rule: sameAsX)
        b.add(OpSchema("topk", [x(.numeric), opt("k", .integer), opt("axis", .integer), opt("ascending", .bool), opt("sort", .bool),
                              opt("return_indices", .bool), opt("output_indices_dtype", .string)])) { ctx in
            let x = try ctx.tensor("x")
            var xs = try ctx.shape("x")
            guard !xs.isEmpty else { throw ctx.fail(.shapeError, "topk of a rank-0 x") }
            let axis = try ctx.normalizeAxis(ctx.constInt("axis") ?? -1, rank: xs.count)
            xs[axis] = ctx.elements("k")?.first ?? 1
            let idt = ctx.string("output_indices_dtype").flatMap { DType(rawValue: $0) } ?? .int32
            return [t(x.dtype, xs), t(idt, xs)]
        }
        b.add(OpSchema("argsort", [x(.numeric), opt("axis", .integer), opt("ascending", .bool)])) { ctx in [t(.int32, try ctx.shape("x"))] }
        b.add(OpSchema("one_hot", [req("indices", .integer), req("one_hot_vector_size", .integer), opt("axis", .integer), opt("on_value"), opt("off_value")])) { ctx in
            var s = try ctx.shape("indices")
            guard let n = ctx.elements("one_hot_vector_size")?.first else { throw Unsupported() }
            let axis = try ctx.normalizeAxis(ctx.constInt("axis") ?? -1, rank: s.count + 1)
            s.insert(n, at: axis)
            let dt = (try? ctx.tensor("on_value"))?.dtype ?? .fp32
            return [t(dt, s)]
        }
        b.add(OpSchema("non_zero", [x()]),
              declaredTypeOnly: "output length depends on the data")
        b.add(OpSchema("non_maximum_suppression", [req("boxes", .float), req("scores", .float), req("max_boxes", .integer),
                                                 opt("iou_threshold", .float), opt("score_threshold", .float), opt("per_class_suppression", .bool)]),
              declaredTypeOnly: "output count depends on the data")
        // iOS15 `classify` (what coremltools' ClassifierConfig adds): the label of the largest
        // probability and the label -> probability dictionary, the function's classifier outputs.
        b.add(OpSchema("classify", [req("probabilities", .float), req("classes")]),
              declaredTypeOnly: "a class label and a dictionary: the declared types are used")
    }

    /// `scatter` and `scatter_along_axis` take the same inputs.
    static var scatterInputs: [InputSpec] {
        [req("data"), req("indices", .integer), req("updates"), opt("axis", .integer), opt("mode", .string), opt("validate_indices", .bool)]
    }
}
