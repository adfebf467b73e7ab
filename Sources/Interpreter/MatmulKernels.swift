import CKernels
import Dispatch
import Foundation
import GraphIR

/// Linear algebra and attention: `linear`, `matmul`, `einsum`, `scaled_dot_product_attention`.
///
/// Products go through ``GEMM`` (fp32) and ``QuantizedGEMM`` (int8 weights with fused
/// dequantization); everything is computed in fp32 (fp16 values are held as Float, see
/// ``Precision``); the plan rounds outputs to the op's dtype.
enum MatmulKernels {
    static let table: [String: Kernel] = [
        "linear": linear,
        "matmul": matmul,
        "einsum": einsum,
        "scaled_dot_product_attention": scaledDotProductAttention,
    ]

    // MARK: - linear

    /// MIL `linear(x, weight, bias?)`: `x [..., in] · weightᵀ [in, out] + bias [out]`. A
    /// quantized `weight` is used compressed (``QuantizedGEMM``), whatever its 2-D block shape.
    static func linear(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        guard x.rank >= 1 else { throw KernelError("x must have rank ≥ 1, got a scalar") }
        let k = x.shape[x.rank - 1]
        let m = x.shape.dropLast().reduce(1, *)
        let weight = try inv.value("weight")
        if case let .halfBlob(shape, h) = weight, shape.count == 2, shape[1] == k, h.count == shape[0] * k {
            return try linearHalf(x: x, m: m, k: k, n: shape[0], weight: h, bias: try biasVector(inv.optionalTensor("bias"), shape[0]))
        }
        let wShape: [Int]
        let quantized: QuantizedTensor?
        if case let .quantized(q) = weight, QuantizedGEMM.layout(q) != nil {
            wShape = q.shape
            quantized = q
        } else {
            wShape = try weight.dense().shape
            quantized = nil
        }
        guard wShape.count == 2, wShape[1] == k else {
            throw KernelError("weight shape \(wShape) does not match x shape \(x.shape) (expected [out, \(k)])")
        }
        let n = wShape[0]
        let bias = try biasVector(inv.optionalTensor("bias"), n)
        // The fp32 GEMM writes every element of C (accumulate off): no zero fill for it (a
        // 786 KB memset per FFN product of a BERT layer).
        var out: [Float] = quantized == nil && k > 0 ? BufferPool.uninitialized(m * n) : BufferPool.zeros(m * n)
        let xs = x.floats
        if m > 0, n > 0 {
            try withBase(xs) { xp in
                try withOptionalBase(bias) { bp in
                    try out.withUnsafeMutableBufferPointer { op in
                        if let q = quantized {
                            try QuantizedGEMM.nt(m: m, a: xp, lda: k, weight: q, c: op.baseAddress!, ldc: n, bias: bp,
                                                 activations: inv.activations)
                        } else {
                            GEMM.ntPacked(m: m, n: n, k: k, a: xp, lda: k, weight: try weight.dense().floats, c: op.baseAddress!, ldc: n, bias: bp)
                        }
                    }
                }
            }
        }
        return [.tensor(Tensor(floatDType(x.dtype), shape: Array(x.shape.dropLast()) + [n], floats: out))]
    }

    /// `linear` whose weight is an fp16 view of the weight file (``RuntimeValue/halfBlob``):
    /// up to 8 rows through `fk_linear_half` (the fp16 bytes read once, widened as read; output
    /// columns split across threads); more rows widen the weight a panel of rows at a time into
    /// a small per-thread buffer (cache-resident) and run the fp32 GEMM on each panel
    /// (``GEMM/widenedPanelsNT``), output columns split across threads. Widening is exact, so both compute with the
    /// same weight values. (Widening the whole weight first wrote and read back 4 bytes a weight
    /// through memory, and its fresh buffer page-faulted on every call: 5–11 % of the samples of
    /// a `bench` run of Apple's fp16 Llama 3.1 recipe.)
    static func linearHalf(x: Tensor, m: Int, k: Int, n: Int, weight h: HalfBuffer, bias: [Float]?) throws -> [RuntimeValue] {
        // The panel route writes every element of the output: no zero fill for it.
        var out: [Float] = m > 8 && k > 0 ? BufferPool.uninitialized(m * n) : BufferPool.zeros(m * n)
        let xs = x.floats
        if m > 0, n > 0, k > 0 {
            if m > 8 {
                withBase(xs) { xp in
                    withOptionalBase(bias) { bp in
                        h.withUnsafeBufferPointer { hp in
                            out.withUnsafeMutableBufferPointer { op in
                                let w = hp.baseAddress!
                                GEMM.widenedPanelsNT(m: m, n: n, k: k, a: xp, lda: k, c: op.baseAddress!, ldc: n, bias: bp, accumulate: false,
                                                     work: m * n * k) { j, rows, panel in
                                    fk_half_to_float(w + j * k, panel, rows * k)
                                }
                            }
                        }
                    }
                }
            } else {
                // Output columns in chunks of whole 4-row groups (the GEMV's pass) on CKernels'
                // spinning pool, as the fp32 and int8 products split (GEMM.parallelChunks): a
                // dispatch worker's wake-up costs about as much as a decode-sized product.
                withBase(xs) { xp in
                    withOptionalBase(bias) { bp in
                        h.withUnsafeBufferPointer { hp in
                            out.withUnsafeMutableBufferPointer { op in
                                let c = UnsafeMutablePointer(op.baseAddress!), w = hp.baseAddress!
                                GEMM.parallelChunks(n, align: 4, work: m * n * k) { cols in
                                    // K floats: the portable body widens each row into it even for one row.
                                    let scratch = UnsafeMutablePointer<Float>.allocate(capacity: k)
                                    defer { scratch.deallocate() }
                                    fk_linear_half(m, n, k, xp, w, bp, c, cols.lowerBound, cols.upperBound, scratch)
                                }
                            }
                        }
                    }
                }
            }
        }
        return [.tensor(Tensor(floatDType(x.dtype), shape: Array(x.shape.dropLast()) + [n], floats: out))]
    }

    // MARK: - matmul

    /// MIL `matmul(x, y, transpose_x, transpose_y)`: numpy `matmul` semantics — batch
    /// dimensions broadcast, a rank-1 `x` is a row vector and a rank-1 `y` a column vector
    /// (their unit dimension dropped from the result); int32 operands give int32 (wrapping).
    /// A rank-2 quantized `y` is used compressed.
    static func matmul(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let yValue = try inv.value("y")
        let tx = try inv.bool("transpose_x", default: false)
        let ty = try inv.bool("transpose_y", default: false)
        var yQuant: QuantizedTensor? = nil
        var yDense: Tensor? = nil
        if case let .quantized(q) = yValue, QuantizedGEMM.layout(q) != nil { yQuant = q } else { yDense = try yValue.dense() }
        let g = try MatmulGeometry(x: x.shape, y: yQuant?.shape ?? yDense!.shape, tx: tx, ty: ty)
        if let yd = yDense, !x.dtype.isFloat, !yd.dtype.isFloat {
            return [.tensor(Tensor(.int32, shape: g.outShape, ints: intMatmul(x.ints, yd.ints, g)))]
        }
        var out = BufferPool.zeros(g.batch.count * g.mn)
        guard !out.isEmpty else { return [.tensor(Tensor(floatDType(x.dtype), shape: g.outShape, floats: out))] }
        let xs = g.xT ? transposedMatrices(x.floats, m: g.m, k: g.k) : x.floats
        try withBase(xs) { xp in
            try out.withUnsafeMutableBufferPointer { op in
                if let q = yQuant {
                    try quantizedMatmul(xp, q, g, op.baseAddress!, activations: inv.activations)
                } else {
                    withBase(yDense!.floats) { yp in floatMatmul(xp, yp, g, op.baseAddress!) }
                }
            }
        }
        return [.tensor(Tensor(floatDType(x.dtype), shape: g.outShape, floats: out))]
    }

    /// The shapes of one `matmul`: logical x [xb..., M, K] (stored transposed when `xT`),
    /// logical y [yb..., K, N] ("NT" when stored as [N, K]: transpose_y, or rank 1), the
    /// broadcast batch and the result shape.
    struct MatmulGeometry {
        let m: Int, k: Int, n: Int
        let xT: Bool, yNT: Bool
        let batch: BatchMap
        let outShape: [Int]
        var mn: Int { m * n }

        init(x xShape: [Int], y yShape: [Int], tx: Bool, ty: Bool) throws {
            guard xShape.count >= 1, yShape.count >= 1 else { throw KernelError("matmul operands must have rank ≥ 1 (x \(xShape), y \(yShape))") }
            let xr = xShape.count, yr = yShape.count
            let xBatch = xr >= 2 ? Array(xShape[0..<(xr - 2)]) : []
            m = xr == 1 ? 1 : (tx ? xShape[xr - 1] : xShape[xr - 2])
            k = xr == 1 ? xShape[0] : (tx ? xShape[xr - 2] : xShape[xr - 1])
            xT = tx && xr >= 2
            let yBatch = yr >= 2 ? Array(yShape[0..<(yr - 2)]) : []
            yNT = yr == 1 || ty
            let ky = yr == 1 ? yShape[0] : (ty ? yShape[yr - 1] : yShape[yr - 2])
            n = yr == 1 ? 1 : (ty ? yShape[yr - 2] : yShape[yr - 1])
            guard k == ky else {
                throw KernelError("matmul inner dimensions differ: x \(xShape)\(tx ? "ᵀ" : ""), y \(yShape)\(ty ? "ᵀ" : "") (\(k) vs \(ky))")
            }
            batch = try BatchMap([xBatch, yBatch], matrixSizes: [m * k, k * n])
            var shape = batch.shape
            if xr >= 2 { shape.append(m) }
            if yr >= 2 { shape.append(n) }
            outShape = shape
        }
    }

    /// Integer operands: exact wrapping int32 arithmetic.
    static func intMatmul(_ xs: [Int32], _ ys: [Int32], _ g: MatmulGeometry) -> [Int32] {
        let (m, k, n, mn) = (g.m, g.k, g.n, g.mn)
        var out = BufferPool.zeroInts(g.batch.count * mn)
        for b in 0..<g.batch.count {
            let off = g.batch.offsets(b)
            let xo = off[0], yo = off[1], co = b * mn
            for i in 0..<m {
                for j in 0..<n {
                    var s: Int32 = 0
                    for p in 0..<k {
                        let xv = xs[xo + (g.xT ? p * m + i : i * k + p)]
                        let yv = ys[yo + (g.yNT ? j * k + p : p * n + j)]
                        s = s &+ xv &* yv
                    }
                    out[co + i * n + j] = s
                }
            }
        }
        return out
    }

    /// Each stored [K, M] matrix of `xs` as a contiguous [M, K] one.
    static func transposedMatrices(_ xs: [Float], m: Int, k: Int) -> [Float] {
        let mats = xs.count / max(1, m * k)
        var t = [Float](repeating: 0, count: xs.count)
        xs.withUnsafeBufferPointer { s in
            t.withUnsafeMutableBufferPointer { d in
                for b in 0..<mats { GEMM.transpose(s.baseAddress! + b * m * k, rows: k, cols: m, ld: m, into: d.baseAddress! + b * m * k) }
            }
        }
        return t
    }

    /// A rank-2 quantized weight: no y batch; the x matrices stacked as rows against it.
    static func quantizedMatmul(_ xp: UnsafePointer<Float>, _ q: QuantizedTensor, _ g: MatmulGeometry,
                                _ cp: UnsafeMutablePointer<Float>, activations: ActivationQuantization) throws {
        let rows = g.batch.count * g.m
        if g.yNT {
            try QuantizedGEMM.nt(m: rows, a: xp, lda: g.k, weight: q, c: cp, ldc: g.n, activations: activations)
        } else {
            try QuantizedGEMM.nn(m: rows, a: xp, lda: g.k, weight: q, c: cp, ldc: g.n)
        }
    }

    /// Dense fp32 operands: one GEMM per batch entry, batches split across cores when each
    /// matrix is too small to split itself.
    static func floatMatmul(_ xp: UnsafePointer<Float>, _ yp: UnsafePointer<Float>, _ g: MatmulGeometry,
                            _ cp: UnsafeMutablePointer<Float>) {
        let (m, k, n, mn) = (g.m, g.k, g.n, g.mn)
        let perMatrix = mn * max(k, 1)
        func one(_ b: Int, threaded: Bool) {
            let off = g.batch.offsets(b)
            if g.yNT {
                GEMM.nt(m: m, n: n, k: k, a: xp + off[0], lda: k, b: yp + off[1], ldb: k, c: cp + b * mn, ldc: n, threaded: threaded)
            } else {
                GEMM.nn(m: m, n: n, k: k, a: xp + off[0], lda: k, b: yp + off[1], ldb: n, c: cp + b * mn, ldc: n, threaded: threaded)
            }
        }
        if g.batch.count >= 2 && perMatrix / 4 < GEMM.parallelGrain {
            GEMM.parallelChunks(g.batch.count, work: g.batch.count * perMatrix) { r in for b in r { one(b, threaded: false) } }
        } else {
            for b in 0..<g.batch.count { one(b, threaded: true) }
        }
    }

    // MARK: - einsum

    /// MIL `einsum(values, equation)`. coremltools emits the batched-matmul forms
    /// `"nchw,nwhu->nchu"` / `"chw,whr->chr"`; this implements einsum generally (any number of
    /// operands, implicit output, `...`, repeated labels = diagonals, labels summed out, size-1
    /// broadcasting of batch labels) by transposes and batched ``GEMM/nt`` products.
    static func einsum(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let equation = try inv.string("equation")
        let tensors = try inv.tensors("values")
        guard !tensors.isEmpty else { throw KernelError("einsum needs at least one operand") }
        let spec = try Einsum.parse(equation, ranks: tensors.map(\.rank))
        var ops: [Einsum.Operand] = zip(spec.inputs, tensors).map { Einsum.Operand(labels: $0, shape: $1.shape, data: $1.floats) }
        let outSet = Set(spec.output)
        for i in ops.indices {
            var keep = outSet
            for (j, o) in ops.enumerated() where j != i { keep.formUnion(o.labels) }
            ops[i] = try ops[i].prepared(keep: keep)
        }
        var cur = ops[0]
        for j in 1..<max(1, ops.count) where ops.count > 1 {
            var keep = outSet
            for o in ops[(j + 1)...] { keep.formUnion(o.labels) }
            cur = try Einsum.contract(cur, ops[j], keep: keep)
        }
        cur = try cur.prepared(keep: outSet)
        for l in spec.output where !cur.labels.contains(l) {
            throw KernelError("einsum '\(equation)': output label \(Einsum.name(l)) does not appear in any operand")
        }
        let result = cur.permuted(to: spec.output)
        let dtype = tensors.first(where: { $0.dtype.isFloat })?.dtype ?? .fp32
        return [.tensor(Tensor(dtype, shape: result.shape, floats: result.data))]
    }

    // MARK: - scaled_dot_product_attention

    /// MIL iOS18 `scaled_dot_product_attention(query, key, value, attn_mask?)`:
    /// `softmax(Q·Kᵀ / √E + mask) · V` over the last two dimensions; a bool mask marks the
    /// allowed positions (false → −∞), a float mask is added. Batch dimensions (and the mask)
    /// broadcast. A row with every position masked gives NaN, as in torch.
    static func scaledDotProductAttention(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let q = try inv.tensor("query"), kt = try inv.tensor("key"), v = try inv.tensor("value")
        let mask = try inv.optionalTensor("attn_mask")
        guard q.rank >= 2, kt.rank >= 2, v.rank >= 2 else {
            throw KernelError("query/key/value need rank ≥ 2 (got \(q.shape), \(kt.shape), \(v.shape))")
        }
        let l = q.shape[q.rank - 2], e = q.shape[q.rank - 1]
        let s = kt.shape[kt.rank - 2], ek = kt.shape[kt.rank - 1]
        let sv = v.shape[v.rank - 2], ev = v.shape[v.rank - 1]
        guard e == ek else { throw KernelError("query and key embedding sizes differ: \(q.shape) vs \(kt.shape)") }
        guard s == sv else { throw KernelError("key and value sequence lengths differ: \(kt.shape) vs \(v.shape)") }
        let batch = try BatchMap([Array(q.shape.dropLast(2)), Array(kt.shape.dropLast(2)), Array(v.shape.dropLast(2))],
                                 matrixSizes: [l * e, s * e, s * ev])
        let full = batch.shape + [l, s]
        var maskStrides: [Int] = []
        var maskFloats: [Float] = []
        if let mk = mask {
            guard mk.rank <= full.count, try BatchMap.broadcastShape([mk.shape, full]) == full else {
                throw KernelError("attn_mask shape \(mk.shape) does not broadcast to \(full)")
            }
            maskStrides = BatchMap.broadcastStrides(of: mk.shape, in: full)
            maskFloats = mk.dtype == .bool ? mk.bools.map { $0 ? 0 : -Float.infinity } : mk.floats
        }
        let outShape = batch.shape + [l, ev]
        var out = BufferPool.zeros(batch.count * l * ev)
        guard !out.isEmpty else { return [.tensor(Tensor(floatDType(q.dtype), shape: outShape, floats: out))] }
        let scale = 1 / Float(e).squareRoot()
        let qs = q.floats, ks = kt.floats, vs = v.floats
        let br = batch.shape.count
        withBase(qs) { qp in
            withBase(ks) { kp in
                withBase(vs) { vp in
                    withBase(maskFloats) { mp in
                        out.withUnsafeMutableBufferPointer { op in
                            let cp = op.baseAddress!
                            func one(_ b: Int, threaded: Bool) {
                                let off = batch.offsets(b)
                                var mbase = 0
                                if mask != nil {
                                    var rem = b
                                    for d in stride(from: br - 1, through: 0, by: -1) {
                                        mbase += (rem % batch.shape[d]) * maskStrides[d]
                                        rem /= batch.shape[d]
                                    }
                                }
                                let scores = UnsafeMutablePointer<Float>.allocate(capacity: max(1, l * s))
                                defer { scores.deallocate() }
                                attentionHead(l: l, s: s, e: e, ev: ev, q: qp + off[0], ldq: e, k: kp + off[1], ldk: e,
                                              v: vp + off[2], ldv: ev, mask: mask == nil ? nil : mp + mbase,
                                              maskRowStride: mask == nil ? 0 : maskStrides[br], maskColumnStride: mask == nil ? 0 : maskStrides[br + 1],
                                              scale: scale, out: cp + b * l * ev, ldo: ev, scores: scores, threaded: threaded)
                            }
                            if batch.count >= 2 {
                                GEMM.parallelChunks(batch.count, work: batch.count * l * s * (e + ev)) { r in for b in r { one(b, threaded: false) } }
                            } else {
                                one(0, threaded: true)
                            }
                        }
                    }
                }
            }
        }
        return [.tensor(Tensor(floatDType(q.dtype), shape: outShape, floats: out))]
    }

    /// One head of `softmax(Q·Kᵀ·scale + mask)·V`: Q `l × e` (rows `ldq` apart), K `s × e` (rows
    /// `ldk` apart), V `s × ev` (rows `ldv` apart), all fp32; the output `l × ev` (rows `ldo`
    /// apart) is overwritten. The scores are rounded as the graph's ops round them: the fp32
    /// product, then `· scale`, then `+ mask[i·maskRowStride + j·maskColumnStride]` (no mask: the
    /// product times `scale`), then softmax rows (`fk_softmax_rows`: a row of all −∞ is NaN; no key column (`s` 0):
    /// zeros). `scores`: `l·s` floats of scratch. `threaded`: the two products may split across cores.
    /// Used by `scaled_dot_product_attention` and the fused attention of encoder-sized queries.
    static func attentionHead(l: Int, s: Int, e: Int, ev: Int, q: UnsafePointer<Float>, ldq: Int, k: UnsafePointer<Float>, ldk: Int,
                              v: UnsafePointer<Float>, ldv: Int, mask: UnsafePointer<Float>?, maskRowStride: Int,
                              maskColumnStride: Int, scale: Float, out: UnsafeMutablePointer<Float>, ldo: Int,
                              scores sc: UnsafeMutablePointer<Float>, threaded: Bool) {
        guard l > 0, ev > 0 else { return }
        if s > 0 { GEMM.nt(m: l, n: s, k: e, a: q, lda: ldq, b: k, ldb: ldk, c: sc, ldc: s, threaded: threaded) }
        for i in 0..<l {
            let row = sc + i * s
            if let mask {
                let mrow = mask + i * maskRowStride
                if maskColumnStride == 1 {
                    for j in 0..<s { row[j] = row[j] * scale + mrow[j] }
                } else {
                    for j in 0..<s { row[j] = row[j] * scale + mrow[j * maskColumnStride] }
                }
            } else {
                for j in 0..<s { row[j] *= scale }
            }
        }
        fk_softmax_rows(sc, l, s, s)
        GEMM.nn(m: l, n: ev, k: s, a: sc, lda: s, b: v, ldb: ldv, c: out, ldc: ldo, threaded: threaded)
    }

    // MARK: - helpers

    /// The float dtype of a result computed from `d` (fp32 for non-float inputs).
    static func floatDType(_ d: DType) -> DType { d.isFloat ? d : .fp32 }

    /// `bias` as `n` floats (a single value is broadcast), or nil.
    static func biasVector(_ bias: Tensor?, _ n: Int) throws -> [Float]? {
        guard let b = bias else { return nil }
        if b.count == n { return b.floats }
        if b.count == 1 { return [Float](repeating: b.floats[0], count: n) }
        throw KernelError("bias has \(b.count) values, expected \(n)")
    }

    /// Calls `body` with the base address of `a` (a valid dummy address when `a` is empty).
    static func withBase<R>(_ a: [Float], _ body: (UnsafePointer<Float>) throws -> R) rethrows -> R {
        if a.isEmpty {
            var dummy: Float = 0
            return try withUnsafePointer(to: &dummy) { try body($0) }
        }
        return try a.withUnsafeBufferPointer { try body($0.baseAddress!) }
    }

    static func withOptionalBase<R>(_ a: [Float]?, _ body: (UnsafePointer<Float>?) throws -> R) rethrows -> R {
        guard let a else { return try body(nil) }
        return try withBase(a) { try body($0) }
    }

    /// Broadcast batch dimensions of several operands (numpy rules, aligned on the right):
    /// the result's batch shape and, per operand, the element offset of each batch entry.
    struct BatchMap {
        let shape: [Int]
        let count: Int
        /// Per operand, element stride along each batch dimension (0 where broadcast).
        let strides: [[Int]]

        init(_ shapes: [[Int]], matrixSizes: [Int]) throws {
            let out = try BatchMap.broadcastShape(shapes)
            shape = out
            count = out.reduce(1, *)
            strides = zip(shapes, matrixSizes).map { s, size in BatchMap.broadcastStrides(of: s, in: out).map { $0 * size } }
        }

        func offsets(_ flat: Int) -> [Int] {
            var off = [Int](repeating: 0, count: strides.count)
            var rem = flat
            for d in stride(from: shape.count - 1, through: 0, by: -1) {
                let i = rem % shape[d]
                rem /= shape[d]
                if i != 0 { for o in 0..<strides.count { off[o] += i * strides[o][d] } }
            }
            return off
        }

        static func broadcastShape(_ shapes: [[Int]]) throws -> [Int] {
            let rank = shapes.map(\.count).max() ?? 0
            var out = [Int](repeating: 1, count: rank)
            for s in shapes {
                for (i, d) in s.enumerated() {
                    let a = rank - s.count + i
                    if out[a] == d || d == 1 { continue }
                    if out[a] == 1 { out[a] = d; continue }
                    throw KernelError("shapes \(shapes.map { "\($0)" }.joined(separator: ", ")) do not broadcast")
                }
            }
            return out
        }

        /// Row-major element strides of `shape` seen from `out` (right-aligned; 0 where broadcast).
        static func broadcastStrides(of shape: [Int], in out: [Int]) -> [Int] {
            var st = [Int](repeating: 0, count: out.count)
            var acc = 1
            for i in stride(from: shape.count - 1, through: 0, by: -1) {
                let a = out.count - shape.count + i
                st[a] = (shape[i] == 1 && out[a] != 1) ? 0 : acc
                acc *= shape[i]
            }
            return st
        }
    }
}

/// einsum as transposes and batched NT products.
enum Einsum {
    /// Labels are small integers: a letter's ASCII value, or 1000 + i for the i-th broadcast
    /// (`...`) dimension counted so that all operands are right-aligned.
    struct Spec {
        var inputs: [[Int]]
        var output: [Int]
    }

    static func name(_ l: Int) -> String { l >= 1000 ? "…\(l - 1000)" : String(UnicodeScalar(UInt8(l))) }

    static func parse(_ equation: String, ranks: [Int]) throws -> Spec {
        let eq = equation.filter { !$0.isWhitespace }
        let parts = eq.components(separatedBy: "->")
        guard parts.count <= 2 else { throw KernelError("einsum equation '\(equation)' has more than one '->'") }
        let terms = parts[0].components(separatedBy: ",")
        guard terms.count == ranks.count else {
            throw KernelError("einsum equation '\(equation)' names \(terms.count) operands, got \(ranks.count)")
        }
        func letters(_ t: String) throws -> (before: [Int], hasEllipsis: Bool, after: [Int]) {
            let pieces = t.components(separatedBy: "...")
            guard pieces.count <= 2 else { throw KernelError("einsum term '\(t)' has more than one '...'") }
            func conv(_ s: String) throws -> [Int] {
                try s.unicodeScalars.map { u in
                    guard u.isASCII, CharacterSetLetters.contains(UInt8(u.value)) else { throw KernelError("einsum term '\(t)': '\(u)' is not a letter") }
                    return Int(u.value)
                }
            }
            return (try conv(pieces[0]), pieces.count == 2, pieces.count == 2 ? try conv(pieces[1]) : [])
        }
        var parsed: [(before: [Int], hasEllipsis: Bool, after: [Int])] = []
        var ell: [Int] = []
        for (t, r) in zip(terms, ranks) {
            let p = try letters(t)
            let named = p.before.count + p.after.count
            let e = r - named
            guard e >= 0, p.hasEllipsis || e == 0 else {
                throw KernelError("einsum term '\(t)' has \(named) labels but its operand has rank \(r)")
            }
            parsed.append(p)
            ell.append(e)
        }
        let maxEll = ell.max() ?? 0
        var inputs: [[Int]] = []
        for (p, e) in zip(parsed, ell) {
            inputs.append(p.before + (0..<e).map { 1000 + maxEll - e + $0 } + p.after)
        }
        var output: [Int]
        if parts.count == 2 {
            let p = try letters(parts[1])
            // Broadcast dimensions absent from an explicit output (no "...") are summed.
            output = p.before + (p.hasEllipsis ? (0..<maxEll).map { 1000 + $0 } : []) + p.after
        } else {
            var counts: [Int: Int] = [:]
            for l in inputs.joined() where l < 1000 { counts[l, default: 0] += 1 }
            output = (0..<maxEll).map { 1000 + $0 } + counts.filter { $0.value == 1 }.keys.sorted()
        }
        guard Set(output).count == output.count else { throw KernelError("einsum output '\(parts.count == 2 ? parts[1] : "")' repeats a label") }
        return Spec(inputs: inputs, output: output)
    }

    static let CharacterSetLetters: Set<UInt8> = Set(Array(UInt8(ascii: "a")...UInt8(ascii: "z")) + Array(UInt8(ascii: "A")...UInt8(ascii: "Z")))

    struct Operand {
        var labels: [Int]
        var shape: [Int]
        var data: [Float]

        /// Diagonals taken for repeated labels, then every label outside `keep` summed out.
        func prepared(keep: Set<Int>) throws -> Operand {
            var cur = self
            if Set(labels).count != labels.count {
                var uniq: [Int] = [], sizes: [Int] = [], strides: [Int] = []
                let st = contiguousStrides(shape)
                for (i, l) in labels.enumerated() {
                    if let j = uniq.firstIndex(of: l) {
                        guard sizes[j] == shape[i] else { throw KernelError("einsum label \(Einsum.name(l)) has sizes \(sizes[j]) and \(shape[i])") }
                        strides[j] += st[i]
                    } else {
                        uniq.append(l); sizes.append(shape[i]); strides.append(st[i])
                    }
                }
                var out = [Float](repeating: 0, count: sizes.reduce(1, *))
                if !out.isEmpty {
                    data.withUnsafeBufferPointer { s in
                        out.withUnsafeMutableBufferPointer { d in GEMM.stridedCopy(s.baseAddress!, shape: sizes, strides: strides, into: d.baseAddress!) }
                    }
                }
                cur = Operand(labels: uniq, shape: sizes, data: out)
            }
            let summed = cur.labels.filter { !keep.contains($0) }
            guard !summed.isEmpty else { return cur }
            let kept = cur.labels.filter { keep.contains($0) }
            let t = cur.permuted(to: kept + summed)
            let inner = summed.map { t.size($0) }.reduce(1, *)
            let outer = kept.map { t.size($0) }.reduce(1, *)
            var out = [Float](repeating: 0, count: outer)
            if inner > 0 {
                for o in 0..<outer {
                    var s: Float = 0
                    for i in 0..<inner { s += t.data[o * inner + i] }
                    out[o] = s
                }
            }
            return Operand(labels: kept, shape: kept.map { t.size($0) }, data: out)
        }

        func size(_ l: Int) -> Int { shape[labels.firstIndex(of: l)!] }

        /// The operand with its axes reordered to `order` (a permutation of its labels).
        func permuted(to order: [Int]) -> Operand {
            if order == labels { return self }
            let st = contiguousStrides(shape)
            let idx = order.map { labels.firstIndex(of: $0)! }
            let newShape = idx.map { shape[$0] }
            var out = [Float](repeating: 0, count: data.count)
            if !out.isEmpty {
                data.withUnsafeBufferPointer { s in
                    out.withUnsafeMutableBufferPointer { d in
                        GEMM.stridedCopy(s.baseAddress!, shape: newShape, strides: idx.map { st[$0] }, into: d.baseAddress!)
                    }
                }
            }
            return Operand(labels: order, shape: newShape, data: out)
        }
    }

    /// Contracts two prepared operands; labels in `keep` survive (batch labels when in both).
    static func contract(_ a: Operand, _ b: Operand, keep: Set<Int>) throws -> Operand {
        let batch = a.labels.filter { b.labels.contains($0) && keep.contains($0) }
        let summed = a.labels.filter { b.labels.contains($0) && !keep.contains($0) }
        let aFree = a.labels.filter { !b.labels.contains($0) }
        let bFree = b.labels.filter { !a.labels.contains($0) }
        for l in summed where a.size(l) != b.size(l) {
            throw KernelError("einsum label \(name(l)) has sizes \(a.size(l)) and \(b.size(l))")
        }
        let at = a.permuted(to: batch + aFree + summed)
        let bt = b.permuted(to: batch + bFree + summed)
        let m = aFree.map { a.size($0) }.reduce(1, *)
        let n = bFree.map { b.size($0) }.reduce(1, *)
        let k = summed.map { a.size($0) }.reduce(1, *)
        let map = try MatmulKernels.BatchMap([batch.map { a.size($0) }, batch.map { b.size($0) }], matrixSizes: [m * k, n * k])
        var out = [Float](repeating: 0, count: map.count * m * n)
        if !out.isEmpty {
            MatmulKernels.withBase(at.data) { ap in
                MatmulKernels.withBase(bt.data) { bp in
                    out.withUnsafeMutableBufferPointer { op in
                        let parallel = map.count >= 2 && m * n * max(k, 1) / 4 < GEMM.parallelGrain
                        func one(_ i: Int, _ threaded: Bool) {
                            let off = map.offsets(i)
                            GEMM.nt(m: m, n: n, k: k, a: ap + off[0], lda: k, b: bp + off[1], ldb: k,
                                    c: op.baseAddress! + i * m * n, ldc: n, threaded: threaded)
                        }
                        if parallel {
                            GEMM.parallelChunks(map.count, work: map.count * m * n * max(k, 1)) { r in for i in r { one(i, false) } }
                        } else {
                            for i in 0..<map.count { one(i, true) }
                        }
                    }
                }
            }
        }
        return Operand(labels: batch + aFree + bFree,
                       shape: map.shape + aFree.map { a.size($0) } + bFree.map { b.size($0) }, data: out)
    }
}
