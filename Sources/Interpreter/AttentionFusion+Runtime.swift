import GraphIR

extension AttentionFusion {
    /// The fused step's kernel: resolves K / V as strided views of their buffers, checks the
    /// grouped-query geometry and runs `fk_attention`; any run-time mismatch runs the original
    /// ops (``FusedFallback``) and is counted on the ``FusionSite``.
    struct Runtime {
        struct Side {
            let chain: [LayoutStep]
            let transposed: Bool
        }

        /// Operand layout: 0 query, 1 K buffer, 2 V buffer, 3 mask (when `hasMask`), then the
        /// chains' parameters (indices in ``LayoutStep/params``).
        let kind: String
        let scale: Float?
        let hasMask: Bool
        let k: Side, v: Side
        let fallback: FusedFallback
        let site: FusionSite

        var kernel: Kernel {
            let me = self
            return { inv in
                do {
                    let out = try me.fused(inv.flat, dtype: inv.outputDType())
                    me.site.fusedCalls += 1
                    return [out]
                } catch let m as LayoutView.Mismatch {
                    me.site.fallbacks[m.reason, default: 0] += 1
                    return [try me.fallback.run(inv.flat, precision: inv.precision, activations: inv.activations)]
                }
            }
        }

        /// A resolved K or V: its buffer and where head `kvh`, row `j` starts
        /// (`offset + kvh · headStride + j · D`).
        struct Geometry {
            let buffer: KV
            let offset: Int, kv: Int, rep: Int, headStride: Int, rows: Int, dim: Int, heads: Int
        }

        /// Query rows up to which K / V that are not D-contiguous are packed for the fused kernel.
        static let packedQueryRows = 16

        /// `packed`: copy the view into a dense [1, H, T, D] tensor even where it could be read in
        /// place (so that K and V agree on their head grouping).
        func geometry(_ side: Side, _ flat: [RuntimeValue], buffer: Int, packed: Bool = false, queryRows: Int) throws -> Geometry {
            let kv = try KV(flat[buffer])
            var view = LayoutView(shape: kv.shape)
            for st in side.chain {
                try st.apply(to: &view) { name in
                    guard let p = st.params.first(where: { $0.name == name }) else { return nil }
                    return try flat[p.index].dense()
                }
            }
            if side.transposed {
                guard view.axes.count >= 2 else { throw LayoutView.Mismatch(reason: "key of rank < 2") }
                view.axes.swapAt(view.axes.count - 1, view.axes.count - 2)
            }
            let shape = view.shape
            guard shape.count == 4, shape[0] == 1 else { throw LayoutView.Mismatch(reason: "key / value view is \(shape), not [1, H, T, D]") }
            let (heads, rows, dim) = (shape[1], shape[2], shape[3])
            let d = view.factors(3), t = view.factors(2), h = view.factors(1)
            guard !packed, d.isEmpty || d == [.init(size: dim, stride: 1)], t.isEmpty || t == [.init(size: rows, stride: dim)] else {
                // Rows that are not D-contiguous (a key or value transposed from [1, S, H, D], as
                // an encoder's attention reads them): packed once into [1, H, T, D].
                guard case .tensor = kv else { throw LayoutView.Mismatch(reason: "cache rows are not contiguous") }
                // The fused kernel takes one query row at a time: for an encoder-sized query the
                // original ops (two GEMMs and softmax rows) are faster (bert6_384 at S = 128:
                // 2.6 ms vs about 1 ms an attention), so only short queries are packed and fused.
                guard queryRows <= Self.packedQueryRows else {
                    throw LayoutView.Mismatch(reason: "a \(queryRows)-row query over K / V that need packing runs faster unfused")
                }
                let dense = try view.gather(kv)
                return Geometry(buffer: .tensor(Tensor(.fp32, shape: shape, floats: dense)), offset: 0, kv: heads, rep: 1,
                                headStride: rows * dim, rows: rows, dim: dim, heads: heads)
            }
            var kvHeads = 1, rep = 1, hs = 0
            switch h.count {
            case 0: break
            case 1 where h[0].stride == 0: rep = h[0].size
            case 1: kvHeads = h[0].size; hs = h[0].stride
            case 2 where h[1].stride == 0 && h[0].stride != 0: kvHeads = h[0].size; hs = h[0].stride; rep = h[1].size
            default: throw LayoutView.Mismatch(reason: "query head h does not read KV head h / rep")
            }
            guard view.base >= 0, hs >= 0 else { throw LayoutView.Mismatch(reason: "negative stride") }
            let count = kv.shape.reduce(1, *)
            guard rows == 0 || view.base + (kvHeads - 1) * hs + rows * dim <= count else {
                throw LayoutView.Mismatch(reason: "view outside its buffer")
            }
            return Geometry(buffer: kv, offset: view.base, kv: kvHeads, rep: rep, headStride: hs, rows: rows, dim: dim, heads: heads)
        }

        func fused(_ flat: [RuntimeValue], dtype: DType) throws -> RuntimeValue {
            let q = try flat[0].dense()
            let qRows = q.rank >= 2 ? q.shape[q.rank - 2] : 1
            var kg = try geometry(k, flat, buffer: 1, queryRows: qRows), vg = try geometry(v, flat, buffer: 2, queryRows: qRows)
            if (kg.rep != vg.rep || kg.kv != vg.kv), case .tensor = kg.buffer, case .tensor = vg.buffer {
                kg = try geometry(k, flat, buffer: 1, packed: true, queryRows: qRows)
                vg = try geometry(v, flat, buffer: 2, packed: true, queryRows: qRows)
            }
            guard q.rank == 4, q.shape[0] == 1, q.shape[1] == kg.heads, q.shape[3] == kg.dim else {
                throw LayoutView.Mismatch(reason: "query \(q.shape) does not fit the key view [1, \(kg.heads), \(kg.rows), \(kg.dim)]")
            }
            guard kg.heads == vg.heads, kg.dim == vg.dim, kg.rows == vg.rows, kg.rep == vg.rep, kg.kv == vg.kv else {
                throw LayoutView.Mismatch(reason: "key and value views differ (\(kg.kv)×\(kg.rep) vs \(vg.kv)×\(vg.rep) heads)")
            }
            let (h, s, d, t) = (q.shape[1], q.shape[2], kg.dim, kg.rows)
            // One row pitch for K and V: the kernel reads head kvh at kvh · ctx · D.
            var ctx = t
            for g in [kg, vg] where g.kv > 1 {
                guard g.headStride % d == 0, g.headStride / d >= t else { throw LayoutView.Mismatch(reason: "KV heads overlap") }
                ctx = g.headStride / d
            }
            for g in [kg, vg] where g.kv > 1 && g.headStride != ctx * d {
                throw LayoutView.Mismatch(reason: "K and V have different head strides")
            }
            let (mask, mshape) = try paddedMask(hasMask ? flat[3] : nil, rows: s, columns: t, ctx: ctx)
            let p: Problem
            do {
                p = try Problem(q: q.shape, k: [1, kg.kv, ctx, d], v: [1, vg.kv, ctx, d], mask: mshape, rep: kg.rep)
            } catch let e as KernelError { throw LayoutView.Mismatch(reason: e.reason) }
            let sc = scale ?? 1 / Float(d).squareRoot()
            let out = try run(p, q: q.floats, k: kg.buffer, v: vg.buffer, mask: mask, scale: sc, kOffset: kg.offset, vOffset: vg.offset)
            return .tensor(Tensor(dtype, shape: [1, h, s, d], floats: out))
        }

        /// The additive mask as floats over `ctx` columns: a boolean mask as 0 / −inf, no mask as
        /// zeros, the columns past `columns` (cache rows the graph did not read) −inf.
        func paddedMask(_ value: RuntimeValue?, rows: Int, columns: Int, ctx: Int) throws -> ([Float], [Int]) {
            guard let value else {
                return ((0..<ctx).map { $0 < columns ? 0 : -.infinity }, [1, ctx])
            }
            let m = try value.dense()
            guard m.rank >= 1, m.shape[m.rank - 1] == columns else {
                throw LayoutView.Mismatch(reason: "mask \(m.shape) does not end in the \(columns) key columns")
            }
            let f = m.dtype == .bool ? m.bools.map { $0 ? 0 : -Float.infinity } : m.floats
            guard ctx != columns else { return (f, m.shape) }
            let n = f.count / max(columns, 1)
            var out = [Float](repeating: -.infinity, count: n * ctx)
            for r in 0..<n { for c in 0..<columns { out[r * ctx + c] = f[r * columns + c] } }
            var shape = m.shape
            shape[shape.count - 1] = ctx
            return (out, shape)
        }
    }
}
