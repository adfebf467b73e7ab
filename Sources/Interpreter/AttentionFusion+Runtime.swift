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
        /// The last geometry of K and V, by what it was resolved from (``geometry(_:_:buffer:packed:queryRows:)``).
        let memo = [GeometryMemo(), GeometryMemo()]

        /// A resolved geometry and its key: the buffer's kind and shape, the query rows and the
        /// value of every parameter of the side's chain. A decode step resolves the same chain
        /// over the same shapes token after token (some 23k instructions each time, measured with
        /// callgrind on the SmolLM2 twin): the key is compared instead.
        final class GeometryMemo {
            var key: [Int] = []
            var geometry: Geometry?
        }

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
        /// (`offset + kvh · headStride + j · rowStride`; `rowStride` is D but for the strided
        /// view of an encoder-sized query, see ``packedQueryRows``).
        struct Geometry {
            let buffer: KV
            let offset: Int, kv: Int, rep: Int, headStride: Int, rows: Int, dim: Int, heads: Int
            var rowStride: Int

            init(buffer: KV, offset: Int, kv: Int, rep: Int, headStride: Int, rows: Int, dim: Int, heads: Int, rowStride: Int? = nil) {
                self.buffer = buffer
                self.offset = offset; self.kv = kv; self.rep = rep; self.headStride = headStride
                self.rows = rows; self.dim = dim; self.heads = heads
                self.rowStride = rowStride ?? dim
            }

            /// Rows `rowStride` apart, not D: only the blocked route (``Runtime/blocked``) reads them.
            var strided: Bool { rowStride != dim }

            /// The same geometry over `buffer` (a memoized one, over this call's buffer).
            func over(_ buffer: KV) -> Geometry {
                Geometry(buffer: buffer, offset: offset, kv: kv, rep: rep, headStride: headStride, rows: rows, dim: dim, heads: heads,
                         rowStride: rowStride)
            }
        }

        /// Query rows up to which K / V that are not D-contiguous are packed for the per-row
        /// kernel (`fk_attention`). A longer query over fp32 K / V rows read in place with a row
        /// stride (an encoder's heads split from [1, S, H, D]) runs the blocked route instead:
        /// per head two GEMMs and softmax rows, the heads split across cores.
        static let packedQueryRows = 16

        /// `packed`: copy the view into a dense [1, H, T, D] tensor even where it could be read in
        /// place (so that K and V agree on their head grouping).
        func geometry(_ side: Side, _ flat: [RuntimeValue], buffer: Int, packed: Bool = false, queryRows: Int) throws -> Geometry {
            let kv = try KV(flat[buffer])
            let memo = packed ? nil : self.memo[buffer == 1 ? 0 : 1]
            var key: [Int] = []
            if let memo {
                key.reserveCapacity(memo.key.count)
                if case .state = kv { key.append(1) } else { key.append(0) }
                key.append(queryRows)
                key.append(kv.shape.count)
                key += kv.shape
                for st in side.chain {
                    for p in st.params {
                        let t = try flat[p.index].dense()
                        key.append(-1)
                        switch t.data {
                        case let .int(a): key.append(0); for x in a { key.append(Int(x)) }
                        case let .bool(a): key.append(1); for x in a { key.append(x ? 1 : 0) }
                        case let .float(a): key.append(2); for x in a { key.append(Int(x.bitPattern)) }
                        case .string: key.append(3)
                        }
                    }
                }
                if key == memo.key, let g = memo.geometry { return g.over(kv) }
            }
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
            let dContiguous = d.isEmpty || d == [.init(size: dim, stride: 1)]
            let rowStride = t.isEmpty ? dim : t.count == 1 && t[0].stride > 0 ? t[0].stride : nil
            if packed || !dContiguous || rowStride != dim {
                // Rows that are not D-contiguous (a key or value transposed from [1, S, H, D], as
                // an encoder's attention reads them).
                guard case .tensor = kv else { throw LayoutView.Mismatch(reason: "cache rows are not contiguous") }
                // The per-row kernel at S = 128 took 2.6 ms an attention of bert6_384 against
                // about 1 ms for the original ops: a long query reads the rows in place through
                // the blocked route (below); a short one packs them once into [1, H, T, D].
                let blocked = !packed && queryRows > Self.packedQueryRows && dContiguous && rowStride != nil
                if !blocked {
                    guard queryRows <= Self.packedQueryRows else {
                        throw LayoutView.Mismatch(reason: "a \(queryRows)-row query over K / V rows that are not row-strided")
                    }
                    let dense = try view.gather(kv)
                    return Geometry(buffer: .tensor(Tensor(.fp32, shape: shape, floats: dense)), offset: 0, kv: heads, rep: 1,
                                    headStride: rows * dim, rows: rows, dim: dim, heads: heads)
                }
            }
            let rs = rowStride ?? dim
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
            guard rows == 0 || view.base + (kvHeads - 1) * hs + (rows - 1) * rs + dim <= count else {
                throw LayoutView.Mismatch(reason: "view outside its buffer")
            }
            let g = Geometry(buffer: kv, offset: view.base, kv: kvHeads, rep: rep, headStride: hs, rows: rows, dim: dim, heads: heads,
                             rowStride: rs)
            if let memo {
                memo.key = key
                memo.geometry = g
            }
            return g
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
            if t == 0 {  // no key column: softmax over an empty axis, then an empty product: zeros, as the graph and torch give
                _ = try paddedMask(hasMask ? flat[3] : nil, rows: s, columns: 0, ctx: 0)
                return .tensor(Tensor(dtype, shape: [1, h, s, d], floats: [Float](repeating: 0, count: h * s * d)))
            }
            if kg.strided || vg.strided {
                let (mask, mshape) = try paddedMask(hasMask ? flat[3] : nil, rows: s, columns: t, ctx: t)
                let p: Problem
                do {
                    p = try Problem(q: q.shape, k: [1, kg.kv, t, d], v: [1, vg.kv, t, d], mask: mshape, rep: kg.rep)
                } catch let e as KernelError { throw LayoutView.Mismatch(reason: e.reason) }
                let out = try blocked(p, q: q.floats, k: kg, v: vg, mask: mask, scale: scale ?? 1 / Float(d).squareRoot())
                return .tensor(Tensor(dtype, shape: [1, h, s, d], floats: out))
            }
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

        /// The blocked route of a long query over fp32 K / V read in place (rows
        /// `rowStride` apart): per head, the graph's own operations in its order
        /// (``MatmulKernels/attentionHead``: Q·Kᵀ, `· scale`, `+ mask`, softmax rows, ·V), the
        /// heads split across cores. [H, S, D] floats.
        /// - Throws: `LayoutView.Mismatch` when K or V is not a tensor (a state is read by the
        ///   per-row kernel only).
        func blocked(_ p: Problem, q: [Float], k kg: Geometry, v vg: Geometry, mask: [Float], scale: Float) throws -> [Float] {
            guard case let .tensor(kt) = kg.buffer, case let .tensor(vt) = vg.buffer else {
                throw LayoutView.Mismatch(reason: "strided key / value rows that are not a tensor")
            }
            let (h, s, d, t) = (p.h, p.s, p.d, p.ctx)
            guard h * s * d > 0 else { return [] }
            guard t > 0 else { return [Float](repeating: 0, count: h * s * d) }  // no key column: zeros, as the graph gives
            var out: [Float] = BufferPool.uninitialized(h * s * d)
            let kf = kt.floats, vf = vt.floats
            MatmulKernels.withBase(q) { qp in
                MatmulKernels.withBase(kf) { kp in
                    MatmulKernels.withBase(vf) { vp in
                        MatmulKernels.withBase(mask) { mp in
                            out.withUnsafeMutableBufferPointer { op in
                                let o = op.baseAddress!
                                GEMM.parallelChunks(h, work: h * s * t * 2 * d) { r in
                                    let scores = UnsafeMutablePointer<Float>.allocate(capacity: s * t)
                                    defer { scores.deallocate() }
                                    for head in r {
                                        let kvh = head / p.rep
                                        MatmulKernels.attentionHead(
                                            l: s, s: t, e: d, ev: d, q: qp + head * s * d, ldq: d,
                                            k: kp + kg.offset + kvh * kg.headStride, ldk: kg.rowStride,
                                            v: vp + vg.offset + kvh * vg.headStride, ldv: vg.rowStride,
                                            mask: mp + head * p.maskHeadStride, maskRowStride: p.maskRowStride, maskColumnStride: 1,
                                            scale: scale, out: o + head * s * d, ldo: d, scores: scores, threaded: false)
                                    }
                                }
                            }
                        }
                    }
                }
            }
            return out
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
