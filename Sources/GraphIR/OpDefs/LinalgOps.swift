/// Linear algebra (MIL `linear`): `linear`, `matmul`, `einsum`, `scaled_dot_product_attention`.
/// Kernels: `Interpreter/MatmulKernels.swift` (fused attention: `AttentionFusion.swift`).
extension OpDefs {
    static func declareLinalg(_ b: inout OpTableBuilder) {
        b.family = .linalg
        // iOS17: weight and bias may be fp16, fp32 or int32 whatever x is (U ∈ {fp16, fp32, i32}).
        b.add(OpSchema("linear", [x(.float), req("weight", .numeric), opt("bias", .numeric)], compressedInputs: ["weight"])) { ctx in
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
        b.add(OpSchema("matmul", [x(.numeric), req("y", .numeric), opt("transpose_x", .bool), opt("transpose_y", .bool)], compressedInputs: ["y"])) { ctx in
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
        b.add(OpSchema("einsum", [InputSpec("values", .numeric, variadic: true), req("equation", .string)]),
              declaredTypeOnly: "output shape follows the equation string; the declared type is used")
        b.add(OpSchema("scaled_dot_product_attention", [req("query", .float), req("key", .float), req("value", .float), opt("attn_mask")])) { ctx in
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
    }
}
