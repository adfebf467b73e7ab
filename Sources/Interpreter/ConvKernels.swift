import GraphIR

/// Convolution and pooling (MIL `conv`, `conv_transpose`, `avg_pool`, `max_pool`, `l2_pool`)
/// over 1, 2 or 3 spatial dimensions, layout `[N, C, *D]`.
///
/// `conv` is im2col + ``GEMM/nn`` per (batch, group); `conv_transpose` is ``GEMM/nn`` +
/// col2im. Geometry follows coremltools' `ops/defs/_utils.py`: `same` pads
/// `max(0, (⌈in/s⌉ − 1)·s + k_eff − in)` in total, the odd element after (`same_lower`:
/// before); `ceil_mode` as `spatial_dimensions_out_shape`; windows that run past the padded
/// input in ceil mode are clipped as torch does.
enum ConvKernels {
    static let table: [String: Kernel] = [
        "conv": conv,
        "conv_transpose": convTranspose,
        "avg_pool": { try pool($0, .avg) },
        "max_pool": { try pool($0, .max) },
        "l2_pool": { try pool($0, .l2) },
    ]

    // MARK: - geometry

    /// A per-spatial-dimension integer input (`strides`, `dilations`, `kernel_sizes`).
    static func spatial(_ inv: KernelInvocation, _ name: String, rank r: Int, default d: Int) throws -> [Int] {
        guard inv.has(name) else { return [Int](repeating: d, count: r) }
        let v = try inv.ints(name)
        if v.count == 1 && r > 1 { return [Int](repeating: v[0], count: r) }
        guard v.count == r else { throw KernelError("'\(name)' has \(v.count) values, expected \(r) (one per spatial dimension)") }
        guard v.allSatisfy({ $0 >= 1 }) else { throw KernelError("'\(name)' must be positive, got \(v)") }
        return v
    }

    /// Begin/end padding per spatial dimension for `valid`, `custom`, `same`, `same_lower`.
    static func padding(_ type: String, custom: [Int]?, input: [Int], effectiveKernel k: [Int], strides s: [Int]) throws -> (begin: [Int], end: [Int]) {
        let r = input.count
        switch type {
        case "valid":
            return ([Int](repeating: 0, count: r), [Int](repeating: 0, count: r))
        case "custom":
            let p = custom ?? [Int](repeating: 0, count: 2 * r)
            guard p.count == 2 * r else { throw KernelError("'pad' has \(p.count) values, expected \(2 * r)") }
            guard p.allSatisfy({ $0 >= 0 }) else { throw KernelError("'pad' must be non-negative, got \(p)") }
            return ((0..<r).map { p[2 * $0] }, (0..<r).map { p[2 * $0 + 1] })
        case "same", "same_lower":
            var b = [Int](), e = [Int]()
            for d in 0..<r {
                let total = max(0, ((input[d] + s[d] - 1) / s[d] - 1) * s[d] + k[d] - input[d])
                let small = total / 2, large = total - small
                b.append(type == "same" ? small : large)
                e.append(type == "same" ? large : small)
            }
            return (b, e)
        default:
            throw KernelError("unknown pad_type '\(type)' (expected valid, custom, same or same_lower)")
        }
    }

    /// Pads per-dimension arrays on the left to three spatial dimensions.
    static func to3(_ a: [Int], _ fill: Int) -> [Int] { [Int](repeating: fill, count: 3 - a.count) + a }

    // MARK: - conv

    /// MIL `conv(x [N, Cin, *D], weight [Cout, Cin/groups, *K], bias?, strides, pad_type, pad,
    /// dilations, groups)`.
    static func conv(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x"), w = try inv.tensor("weight")
        let r = x.rank - 2
        guard (1...3).contains(r) else { throw KernelError("conv x must have rank 3, 4 or 5 ([N, C, *D]), got \(x.shape)") }
        guard w.rank == x.rank else { throw KernelError("conv weight rank \(w.rank) differs from x rank \(x.rank)") }
        let batch = x.shape[0], cin = x.shape[1], cout = w.shape[0]
        let groups = try inv.int("groups", default: 1)
        guard groups >= 1, cin % groups == 0, cout % groups == 0, w.shape[1] * groups == cin else {
            throw KernelError("conv channels: x \(x.shape), weight \(w.shape), groups \(groups)")
        }
        let kernel = Array(w.shape[2...]), input = Array(x.shape[2...])
        let strides = try spatial(inv, "strides", rank: r, default: 1)
        let dil = try spatial(inv, "dilations", rank: r, default: 1)
        let eff = (0..<r).map { (kernel[$0] - 1) * dil[$0] + 1 }
        let padType = try inv.string("pad_type", default: "valid").lowercased()
        let (pb, pe) = try padding(padType, custom: inv.has("pad") ? try inv.ints("pad") : nil, input: input, effectiveKernel: eff, strides: strides)
        let outSp = try (0..<r).map { d -> Int in
            let o = (input[d] + pb[d] + pe[d] - eff[d]) / strides[d] + 1
            guard input[d] + pb[d] + pe[d] >= eff[d], o >= 1 else { throw KernelError("conv output size along spatial dimension \(d) would be \(o) (input \(input), kernel \(kernel), padding \(pb)/\(pe))") }
            return o
        }
        let bias = try MatmulKernels.biasVector(inv.optionalTensor("bias"), cout)
        let I = to3(input, 1), K = to3(kernel, 1), S = to3(strides, 1), Dl = to3(dil, 1), P = to3(pb, 0), O = to3(outSp, 1)
        let cinG = cin / groups, coutG = cout / groups
        let kprod = K[0] * K[1] * K[2], kc = cinG * kprod
        let inP = I[0] * I[1] * I[2], outP = O[0] * O[1] * O[2]
        var out = [Float](repeating: 0, count: batch * cout * outP)
        let direct = kprod == 1 && S == [1, 1, 1] && pb.allSatisfy { $0 == 0 } && pe.allSatisfy { $0 == 0 }
        let xs = x.floats, ws = w.floats
        if !out.isEmpty {
            var cols = [Float](repeating: 0, count: direct ? 0 : kc * outP)
            MatmulKernels.withBase(xs) { xp in
                MatmulKernels.withBase(ws) { wp in
                    cols.withUnsafeMutableBufferPointer { cb in
                        out.withUnsafeMutableBufferPointer { ob in
                            for n in 0..<batch {
                                for g in 0..<groups {
                                    let xg = xp + (n * cin + g * cinG) * inP
                                    if !direct {
                                        im2col(xg, channels: cinG, I, K, S, Dl, P, O, into: cb.baseAddress!)
                                    }
                                    GEMM.nn(m: coutG, n: outP, k: kc, a: wp + g * coutG * kc, lda: kc,
                                            b: direct ? xg : UnsafePointer(cb.baseAddress!), ldb: outP,
                                            c: ob.baseAddress! + (n * cout + g * coutG) * outP, ldc: outP)
                                }
                            }
                            if let bias {
                                for n in 0..<batch {
                                    for co in 0..<cout {
                                        let o = ob.baseAddress! + (n * cout + co) * outP
                                        for i in 0..<outP { o[i] += bias[co] }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        return [.tensor(Tensor(MatmulKernels.floatDType(x.dtype), shape: [batch, cout] + outSp, floats: out))]
    }

    /// `cols[(c·K + kidx)·P + p]` = the input element under kernel offset `kidx` of channel
    /// `c` at output position `p` (0 in the padding). Dimensions padded to three.
    static func im2col(_ x: UnsafePointer<Float>, channels: Int, _ I: [Int], _ K: [Int], _ S: [Int], _ D: [Int], _ P: [Int], _ O: [Int],
                       into cols: UnsafeMutablePointer<Float>) {
        let inP = I[0] * I[1] * I[2], outP = O[0] * O[1] * O[2]
        forEachColumnRow(channels: channels, K) { row, c, kd, kh, kw in
            let xc = x + c * inP, dst = cols + row * outP
            var o = 0
            for od in 0..<O[0] {
                let id = od * S[0] - P[0] + kd * D[0]
                for oh in 0..<O[1] {
                    let ih = oh * S[1] - P[1] + kh * D[1]
                    if id < 0 || id >= I[0] || ih < 0 || ih >= I[1] {
                        for ow in 0..<O[2] { dst[o + ow] = 0 }
                    } else {
                        let src = xc + (id * I[1] + ih) * I[2]
                        for ow in 0..<O[2] {
                            let iw = ow * S[2] - P[2] + kw * D[2]
                            dst[o + ow] = (iw >= 0 && iw < I[2]) ? src[iw] : 0
                        }
                    }
                    o += O[2]
                }
            }
        }
    }

    /// The rows of a column matrix (``im2col``, ``col2im``), in order: one per channel and
    /// kernel offset `(kd, kh, kw)`, channel-major; `row` counts them from 0.
    @inline(__always)
    static func forEachColumnRow(channels: Int, _ K: [Int], _ body: (_ row: Int, _ channel: Int, _ kd: Int, _ kh: Int, _ kw: Int) -> Void) {
        var row = 0
        for c in 0..<channels {
            for kd in 0..<K[0] {
                for kh in 0..<K[1] {
                    for kw in 0..<K[2] {
                        body(row, c, kd, kh, kw)
                        row += 1
                    }
                }
            }
        }
    }

    // MARK: - conv_transpose

    /// MIL `conv_transpose(x [N, Cin, *D], weight [Cin, Cout/groups, *K], bias?, pad,
    /// output_shape?, pad_type, strides, dilations, groups)`. The full result has
    /// `(in − 1)·s + k_eff` positions per dimension; `pad` (custom) crops from its start and
    /// end; `same` gives `in·s` (cropping `k_eff − s` in total, the odd one at the end);
    /// `output_shape` fixes the size (positions past the full result are bias only).
    static func convTranspose(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x"), w = try inv.tensor("weight")
        let r = x.rank - 2
        guard (1...3).contains(r) else { throw KernelError("conv_transpose x must have rank 3, 4 or 5 ([N, C, *D]), got \(x.shape)") }
        guard w.rank == x.rank else { throw KernelError("conv_transpose weight rank \(w.rank) differs from x rank \(x.rank)") }
        let batch = x.shape[0], cin = x.shape[1]
        let groups = try inv.int("groups", default: 1)
        guard groups >= 1, w.shape[0] == cin, cin % groups == 0 else {
            throw KernelError("conv_transpose channels: x \(x.shape), weight \(w.shape) (expected [Cin, Cout/groups, *K]), groups \(groups)")
        }
        let cout = w.shape[1] * groups
        let kernel = Array(w.shape[2...]), input = Array(x.shape[2...])
        let strides = try spatial(inv, "strides", rank: r, default: 1)
        let dil = try spatial(inv, "dilations", rank: r, default: 1)
        let (pb, outSp) = try convTransposeOutput(inv, input: input, kernel: kernel, strides: strides, dilations: dil)
        let bias = try MatmulKernels.biasVector(inv.optionalTensor("bias"), cout)
        let geometry = ConvTransposeGeometry(I: to3(input, 1), K: to3(kernel, 1), S: to3(strides, 1), D: to3(dil, 1),
                                             P: to3(pb, 0), O: to3(outSp, 1))
        var out = convTransposeProducts(x.floats, w.floats, batch: batch, cin: cin, cout: cout, groups: groups, geometry)
        if let bias {
            let outP = geometry.outPositions
            for n in 0..<batch {
                for co in 0..<cout {
                    let base = (n * cout + co) * outP
                    for i in 0..<outP { out[base + i] += bias[co] }
                }
            }
        }
        return [.tensor(Tensor(MatmulKernels.floatDType(x.dtype), shape: [batch, cout] + outSp, floats: out))]
    }

    /// The spatial sizes of one `conv_transpose`, each padded to three dimensions: input `I`,
    /// kernel `K`, strides `S`, dilations `D`, begin crop `P`, output `O`.
    struct ConvTransposeGeometry {
        let I: [Int], K: [Int], S: [Int], D: [Int], P: [Int], O: [Int]
        var inPositions: Int { I[0] * I[1] * I[2] }
        var outPositions: Int { O[0] * O[1] * O[2] }
        var kernelPositions: Int { K[0] * K[1] * K[2] }
    }

    /// The begin crop and output size per spatial dimension from `pad_type`, `pad` and
    /// `output_shape` (rank `r` or `r + 2` values; it wins over the padding's size).
    static func convTransposeOutput(_ inv: KernelInvocation, input: [Int], kernel: [Int], strides: [Int], dilations: [Int]) throws -> (begin: [Int], size: [Int]) {
        let r = input.count
        let eff = (0..<r).map { (kernel[$0] - 1) * dilations[$0] + 1 }
        let full = (0..<r).map { (input[$0] - 1) * strides[$0] + eff[$0] }
        let padType = try inv.string("pad_type", default: "valid").lowercased()
        var given: [Int]? = nil
        if inv.has("output_shape") {
            let os = try inv.ints("output_shape")
            guard os.count == r || os.count == r + 2 else { throw KernelError("output_shape \(os) has neither \(r) nor \(r + 2) values") }
            given = Array(os.suffix(r))
        }
        var pb = [Int](repeating: 0, count: r), outSp = full
        switch padType {
        case "valid":
            break
        case "custom":
            let p = inv.has("pad") ? try inv.ints("pad") : [Int](repeating: 0, count: 2 * r)
            guard p.count == 2 * r else { throw KernelError("'pad' has \(p.count) values, expected \(2 * r)") }
            pb = (0..<r).map { p[2 * $0] }
            outSp = (0..<r).map { full[$0] - p[2 * $0] - p[2 * $0 + 1] }
        case "same", "same_lower":
            let target = given ?? (0..<r).map { input[$0] * strides[$0] }
            pb = (0..<r).map { d in
                let total = max(0, full[d] - target[d])
                return padType == "same" ? total / 2 : total - total / 2
            }
            outSp = target
        default:
            throw KernelError("unknown pad_type '\(padType)' (expected valid, custom, same or same_lower)")
        }
        if let g = given { outSp = g }
        guard outSp.allSatisfy({ $0 >= 1 }) else { throw KernelError("conv_transpose output size \(outSp) is not positive") }
        return (pb, outSp)
    }

    /// `[N, Cout, *O]` without bias: per (batch, group) `Wᵀ·x` (``GEMM/nn``) gives every
    /// input position's contribution under every kernel offset, which ``col2im`` adds into
    /// the output. `xs` is `[N, Cin, *I]`, `ws` `[Cin, Cout/groups, *K]`.
    static func convTransposeProducts(_ xs: [Float], _ ws: [Float], batch: Int, cin: Int, cout: Int, groups: Int,
                                      _ g: ConvTransposeGeometry) -> [Float] {
        let inP = g.inPositions, outP = g.outPositions
        let cinG = cin / groups, coutG = cout / groups, rowsG = coutG * g.kernelPositions
        var out = [Float](repeating: 0, count: batch * cout * outP)
        guard !out.isEmpty && inP > 0 else { return out }
        // Wᵀ per group: [Cout/groups · kprod, Cin/groups].
        var wt = [Float](repeating: 0, count: ws.count)
        MatmulKernels.withBase(ws) { wp in
            wt.withUnsafeMutableBufferPointer { tb in
                for gi in 0..<groups {
                    GEMM.transpose(wp + gi * cinG * rowsG, rows: cinG, cols: rowsG, ld: rowsG, into: tb.baseAddress! + gi * cinG * rowsG)
                }
            }
        }
        var cols = [Float](repeating: 0, count: rowsG * inP)
        MatmulKernels.withBase(xs) { xp in
            wt.withUnsafeBufferPointer { tb in
                cols.withUnsafeMutableBufferPointer { cb in
                    out.withUnsafeMutableBufferPointer { ob in
                        for n in 0..<batch {
                            for gi in 0..<groups {
                                GEMM.nn(m: rowsG, n: inP, k: cinG, a: tb.baseAddress! + gi * cinG * rowsG, lda: cinG,
                                        b: xp + (n * cin + gi * cinG) * inP, ldb: inP, c: cb.baseAddress!, ldc: inP)
                                col2im(UnsafePointer(cb.baseAddress!), channels: coutG, g,
                                       into: ob.baseAddress! + (n * cout + gi * coutG) * outP)
                            }
                        }
                    }
                }
            }
        }
        return out
    }

    /// Adds `cols[(c·K + kidx)·I + i]` (input position `i` under kernel offset `kidx` of output
    /// channel `c`) into `out[c·O + o]` at `o = i·S − P + kidx·D` per dimension, skipping
    /// positions outside the output: the inverse of ``im2col``.
    static func col2im(_ cols: UnsafePointer<Float>, channels: Int, _ g: ConvTransposeGeometry, into out: UnsafeMutablePointer<Float>) {
        let I = g.I, K = g.K, S = g.S, D = g.D, P = g.P, O = g.O
        let inP = g.inPositions, outP = g.outPositions
        forEachColumnRow(channels: channels, K) { row, co, kd, kh, kw in
            let dst = out + co * outP, src = cols + row * inP
            for id in 0..<I[0] {
                let od = id * S[0] - P[0] + kd * D[0]
                if od < 0 || od >= O[0] { continue }
                for ih in 0..<I[1] {
                    let oh = ih * S[1] - P[1] + kh * D[1]
                    if oh < 0 || oh >= O[1] { continue }
                    let s = src + (id * I[1] + ih) * I[2]
                    let d = dst + (od * O[1] + oh) * O[2]
                    for iw in 0..<I[2] {
                        let ow = iw * S[2] - P[2] + kw * D[2]
                        if ow >= 0 && ow < O[2] { d[ow] += s[iw] }
                    }
                }
            }
        }
    }

    // MARK: - pooling

    enum PoolKind { case avg, max, l2 }

    /// MIL `avg_pool` / `max_pool` / `l2_pool(x, kernel_sizes, strides, pad_type, pad,
    /// exclude_padding_from_average (avg), ceil_mode)`. Padding is ignored by `max_pool`,
    /// zeros for `l2_pool`, and for `avg_pool` counted in the divisor unless
    /// `exclude_padding_from_average` (windows are first clipped to the padded input, as torch).
    static func pool(_ inv: KernelInvocation, _ kind: PoolKind) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let r = x.rank - 2
        guard (1...3).contains(r) else { throw KernelError("pool x must have rank 3, 4 or 5 ([N, C, *D]), got \(x.shape)") }
        let kernel = try spatial(inv, "kernel_sizes", rank: r, default: 1)
        let strides = try spatial(inv, "strides", rank: r, default: 1)
        let input = Array(x.shape[2...])
        let padType = try inv.string("pad_type", default: "valid").lowercased()
        let (pb, pe) = try padding(padType, custom: inv.has("pad") ? try inv.ints("pad") : nil, input: input, effectiveKernel: kernel, strides: strides)
        let ceilMode = try inv.bool("ceil_mode", default: false)
        let exclude = try inv.bool("exclude_padding_from_average", default: false)
        let outSp = try (0..<r).map { d -> Int in
            let total = pb[d] + pe[d]
            var o: Int
            if ceilMode {
                o = (input[d] + total - kernel[d] + strides[d] - 1) / strides[d] + 1
                if total > 0 && (o - 1) * strides[d] >= input[d] + total / 2 { o -= 1 }
            } else {
                o = (input[d] + total - kernel[d]) / strides[d] + 1
            }
            guard input[d] + total >= kernel[d], o >= 1 else { throw KernelError("pool output size along spatial dimension \(d) would be \(o) (input \(input), kernel \(kernel))") }
            return o
        }
        let I = to3(input, 1), K = to3(kernel, 1), S = to3(strides, 1), P = to3(pb, 0), E = to3(pe, 0), O = to3(outSp, 1)
        let planes = x.shape[0] * x.shape[1]
        let inP = I[0] * I[1] * I[2], outP = O[0] * O[1] * O[2]
        var out = [Float](repeating: 0, count: planes * outP)
        let xs = x.floats
        // Per dimension and output index: clipped window [lo, hi) and the unclipped size
        // within the padded input.
        func windows(_ d: Int) -> [(lo: Int, hi: Int, size: Int)] {
            (0..<O[d]).map { o in
                let start = o * S[d] - P[d]
                let end = min(start + K[d], I[d] + E[d])
                return (max(0, start), min(I[d], end), end - start)
            }
        }
        let wd = windows(0), wh = windows(1), ww = windows(2)
        xs.withUnsafeBufferPointer { xb in
            out.withUnsafeMutableBufferPointer { ob in
                guard let xbase = xb.baseAddress, let obase = ob.baseAddress else { return }
                for p in 0..<planes {
                    let xp = xbase + p * inP
                    var o = p * outP
                    for a in wd {
                        for b in wh {
                            for c in ww {
                                var acc: Float = kind == .max ? -.infinity : 0
                                for i in a.lo..<max(a.lo, a.hi) {
                                    for j in b.lo..<max(b.lo, b.hi) {
                                        let row = xp + (i * I[1] + j) * I[2]
                                        switch kind {
                                        case .max: for k in c.lo..<max(c.lo, c.hi) { acc = Swift.max(acc, row[k]) }
                                        case .avg: for k in c.lo..<max(c.lo, c.hi) { acc += row[k] }
                                        case .l2: for k in c.lo..<max(c.lo, c.hi) { acc += row[k] * row[k] }
                                        }
                                    }
                                }
                                switch kind {
                                case .max: break
                                case .l2: acc = acc.squareRoot()
                                case .avg:
                                    let n = exclude
                                        ? max(0, a.hi - a.lo) * max(0, b.hi - b.lo) * max(0, c.hi - c.lo)
                                        : a.size * b.size * c.size
                                    acc = n > 0 ? acc / Float(n) : .nan
                                }
                                obase[o] = acc
                                o += 1
                            }
                        }
                    }
                }
            }
        }
        return [.tensor(Tensor(MatmulKernels.floatDType(x.dtype), shape: Array(x.shape[0..<2]) + outSp, floats: out))]
    }
}
