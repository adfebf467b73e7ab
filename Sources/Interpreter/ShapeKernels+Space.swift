import GraphIR

/// Space/batch rearrangements and sequence reversal (MIL iOS15 / iOS16 `tensor_transformation`).
/// Source: the MIL op reference (`coremltools.converters.mil.mil.ops.defs.iOS15/iOS16.tensor_transformation`).
///
/// - `pixel_unshuffle(x [N, C, H, W], downscale_factor f)` (iOS16) → [N, C·f², H/f, W/f],
///   `out[n, c·f² + i·f + j, h, w] = x[n, c, h·f + i, w·f + j]` (torch's PixelUnshuffle).
/// - `space_to_batch(x [N, C, H, W], block_shape [bh, bw], paddings [[t, b], [l, r]])` →
///   [N·bh·bw, C, (H+t+b)/bh, (W+l+r)/bw], `out[(i·bw + j)·N + n, c, h, w] = padded[n, c, h·bh + i, w·bw + j]`
///   (TensorFlow's space_to_batch_nd, zeros in the padding).
/// - `batch_to_space(x, block_shape, crops)`: its inverse, then `crops` removed.
/// - `reverse_sequence(x, lengths, seq_axis = 0, batch_axis = 0)`: for each index b along
///   `batch_axis`, the first `lengths[b]` elements along `seq_axis` reversed (tf.reverse_sequence).
extension ShapeKernels {
    static let spaceTable: [String: Kernel] = [
        "pixel_unshuffle": pixelUnshuffle,
        "space_to_batch": spaceToBatch,
        "batch_to_space": batchToSpace,
        "reverse_sequence": reverseSequence,
    ]

    /// A tensor of `shape` whose element i is `x`'s element `source(i)` (nil: zero).
    static func gathered(_ x: Tensor, shape: [Int], _ source: (Int) -> Int?) -> Tensor {
        let n = product(shape)
        func build<T>(_ a: [T], _ zero: T) -> [T] { (0..<n).map { i in source(i).map { a[$0] } ?? zero } }
        let data: TensorData
        switch x.data {
        case let .float(a): data = .float(build(a, 0))
        case let .int(a): data = .int(build(a, 0))
        case let .bool(a): data = .bool(build(a, false))
        case let .string(a): data = .string(build(a, ""))
        }
        return tensor(like: x, shape: shape, data: data)
    }

    static func pixelUnshuffle(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let (n, c, h, w) = try rank4(x, "pixel_unshuffle")
        let f = try inv.int("downscale_factor")
        guard f >= 1, h % f == 0, w % f == 0 else {
            throw KernelError("pixel_unshuffle: H \(h) and W \(w) must be multiples of downscale_factor \(f) (≥ 1)")
        }
        let ho = h / f, wo = w / f
        return [.tensor(try view(x, shape: [n, c, f, f, ho, wo], offset: 0,
                                 strides: [c * h * w, h * w, w, 1, f * w, f], resultShape: [n, c * f * f, ho, wo]))]
    }

    static func blockParams(_ inv: KernelInvocation, _ name: String) throws -> (bh: Int, bw: Int, p: [Int]) {
        let b = try inv.ints("block_shape"), p = try inv.ints(name)
        guard b.count == 2, b.allSatisfy({ $0 >= 1 }), p.count == 4, p.allSatisfy({ $0 >= 0 }) else {
            throw KernelError("\(inv.op.type): block_shape \(b) must be 2 positive values and \(name) \(p) a [2, 2] of non-negative values")
        }
        return (b[0], b[1], p)
    }

    static func spaceToBatch(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let (n, c, h, w) = try rank4(x, "space_to_batch")
        let (bh, bw, p) = try blockParams(inv, "paddings")
        let ph = h + p[0] + p[1], pw = w + p[2] + p[3]
        guard ph % bh == 0, pw % bw == 0 else {
            throw KernelError("space_to_batch: padded size \(ph)×\(pw) is not a multiple of block_shape [\(bh), \(bw)]")
        }
        let oh = ph / bh, ow = pw / bw, on = n * bh * bw
        return [.tensor(gathered(x, shape: [on, c, oh, ow]) { i in
            let wo = i % ow, ho = (i / ow) % oh, ch = (i / (ow * oh)) % c, ob = i / (ow * oh * c)
            let b = ob % n, blk = ob / n, bi = blk / bw, bj = blk % bw
            let y = ho * bh + bi - p[0], xx = wo * bw + bj - p[2]
            guard y >= 0, y < h, xx >= 0, xx < w else { return nil }
            return ((b * c + ch) * h + y) * w + xx
        })]
    }

    static func batchToSpace(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let (n, c, h, w) = try rank4(x, "batch_to_space")
        let (bh, bw, cr) = try blockParams(inv, "crops")
        guard n % (bh * bw) == 0 else { throw KernelError("batch_to_space: batch \(n) is not a multiple of block_shape [\(bh), \(bw)]") }
        let on = n / (bh * bw)
        let oh = h * bh - cr[0] - cr[1], ow = w * bw - cr[2] - cr[3]
        guard oh >= 0, ow >= 0 else { throw KernelError("batch_to_space: crops \(cr) remove more than \(h * bh)×\(w * bw)") }
        return [.tensor(gathered(x, shape: [on, c, oh, ow]) { i in
            let wo = i % ow + cr[2], ho = (i / ow) % oh + cr[0], ch = (i / (ow * oh)) % c, b = i / (ow * oh * c)
            let bi = ho % bh, bj = wo % bw
            let src = (bi * bw + bj) * on + b
            return ((src * c + ch) * h + ho / bh) * w + wo / bw
        })]
    }

    static func reverseSequence(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let lengths = try inv.ints("lengths")
        let sa = try axis(try inv.int("seq_axis", default: 0), count: x.rank, "reverse_sequence seq_axis")
        let ba = try axis(try inv.int("batch_axis", default: 0), count: x.rank, "reverse_sequence batch_axis")
        guard sa != ba else { throw KernelError("reverse_sequence: seq_axis and batch_axis are both \(sa)") }
        guard lengths.count == x.shape[ba] else {
            throw KernelError("reverse_sequence: lengths has \(lengths.count) values, x.shape[\(ba)] is \(x.shape[ba])")
        }
        for l in lengths where l < 0 || l > x.shape[sa] {
            throw KernelError("reverse_sequence: length \(l) out of range 0...\(x.shape[sa])")
        }
        let strides = contiguousStrides(x.shape)
        return [.tensor(gathered(x, shape: x.shape) { i in
            let s = (i / strides[sa]) % x.shape[sa], b = (i / strides[ba]) % x.shape[ba]
            let l = lengths[b]
            guard s < l else { return i }
            return i + (l - 1 - 2 * s) * strides[sa]
        })]
    }
}
