import GraphIR

/// Tensor transformation ops (MIL `tensor_transformation` / parts of `tensor_operation`):
/// reshape, transpose, expand_dims, squeeze, flatten2d, reverse, tile, concat, stack, split, pad,
/// depth_to_space, space_to_depth, pixel_shuffle, sliding_windows, identity, shape, fill,
/// fill_like, range_1d, band_part, one_hot, reshape_like.
///
/// Every kernel works on any storage (float / int / bool, and string where it is pure data
/// movement). Data movement goes through ``ShapeKernels/Region`` copies: each region is a
/// strided view of a source written into a strided view of the output; dimensions that are
/// contiguous in both are merged so the innermost run is one block copy (`memcpy` for trivial
/// element types), and a transposing copy is done in 32×32 tiles.
enum ShapeKernels {
    static let table: [String: Kernel] = [
        "reshape": reshape,
        "reshape_like": reshapeLike,
        "transpose": transpose,
        "expand_dims": expandDims,
        "squeeze": squeeze,
        "flatten2d": flatten2d,
        "reverse": reverse,
        "tile": tile,
        "concat": concat,
        "stack": stack,
        "split": split,
        "pad": pad,
        "depth_to_space": depthToSpace,
        "space_to_depth": spaceToDepth,
        "pixel_shuffle": pixelShuffle,
        "sliding_windows": slidingWindows,
        "shape": shape,
        "fill": fill,
        "fill_like": fillLike,
        "range_1d": range1d,
        "band_part": bandPart,
        "one_hot": oneHot,
    ]

    // MARK: - helpers

    /// `axis` normalised into `0..<count` (negative counts from the end).
    static func axis(_ a: Int, count: Int, _ what: String = "axis") throws -> Int {
        let n = a < 0 ? a + count : a
        guard n >= 0, n < count else {
            throw KernelError("\(what) \(a) out of range for rank \(count) (valid: \(-count)...\(count - 1))")
        }
        return n
    }

    /// The element count of a shape; `Int.max` when it overflows (so a size check refuses it).
    static func product<C: Collection>(_ c: C) -> Int where C.Element == Int { CheckedSize.elementCount(c) ?? Int.max }

    /// A tensor with the same dtype and the given shape / data.
    static func tensor(like x: Tensor, shape: [Int], data: TensorData) -> Tensor {
        Tensor(dtype: x.dtype, shape: shape, data: data)
    }

    /// Input `name` as a flat list of ints, whether it is one 1-D tensor or a tuple of scalars.
    static func flatInts(_ inv: KernelInvocation, _ name: String) throws -> [Int] {
        guard let vs = inv.all(name) else { throw KernelError("missing input '\(name)'") }
        return try vs.flatMap { try $0.dense().ints.map(Int.init) }
    }
    static func flatBools(_ inv: KernelInvocation, _ name: String) throws -> [Bool] {
        guard let vs = inv.all(name) else { throw KernelError("missing input '\(name)'") }
        return try vs.flatMap { try $0.dense().bools }
    }

    /// Applies the same generic transformation to whichever storage `d` has.
    static func map(_ d: TensorData,
                    _ f: ([Float]) throws -> [Float], _ i: ([Int32]) throws -> [Int32],
                    _ b: ([Bool]) throws -> [Bool], _ s: ([String]) throws -> [String]) rethrows -> TensorData {
        switch d {
        case let .float(a): return .float(try f(a))
        case let .int(a): return .int(try i(a))
        case let .bool(a): return .bool(try b(a))
        case let .string(a): return .string(try s(a))
        }
    }

    /// The first element of `v` (or `d` when absent) as float, int and bool, for whichever storage the output uses.
    static func scalarData(_ v: Tensor?, default d: Float) -> (float: Float, int: Int32, bool: Bool) {
        if let v, v.count >= 1 {
            switch v.data {
            case let .float(a): return (a[0], a[0].isFinite ? Int32(clamping: Int64(a[0])) : 0, a[0] != 0)
            case let .int(a): return (Float(a[0]), a[0], a[0] != 0)
            case let .bool(a): return (a[0] ? 1 : 0, a[0] ? 1 : 0, a[0])
            case .string: break
            }
        }
        return (d, Int32(d), d != 0)
    }

    /// A tensor of `shape` filled with `value`, its storage chosen by `dtype`.
    static func filled(_ dtype: DType, shape: [Int], value: (float: Float, int: Int32, bool: Bool)) throws -> Tensor {
        let n = product(shape)
        try KernelError.checkAllocation(n, shape: shape)
        if dtype.isFloat { return Tensor(dtype, shape: shape, floats: [Float](repeating: value.float, count: n)) }
        if dtype == .bool { return Tensor(shape: shape, bools: [Bool](repeating: value.bool, count: n)) }
        if dtype == .string { return Tensor(dtype: .string, shape: shape, data: .string([String](repeating: "", count: n))) }
        return Tensor(dtype, shape: shape, ints: [Int32](repeating: value.int, count: n))
    }

    // MARK: - reshape family

    /// Resolves a MIL reshape target: `-1` is inferred (at most one), `0` copies the matching
    /// input dimension counted from the right (iOS17; the same as iOS15 when the ranks match,
    /// where iOS15 requires them to), or 1 when there is none.
    static func resolveReshape(from: [Int], to: [Int]) throws -> [Int] {
        var out = to
        for i in out.indices where out[i] == 0 {
            let j = from.count - (to.count - i)
            out[i] = j >= 0 ? from[j] : 1
        }
        if let bad = out.first(where: { $0 < -1 }) { throw KernelError("reshape: invalid dimension \(bad) in shape \(to)") }
        // The -1 entry, if any (one pass, no arrays built: this runs per call of every reshape).
        var inferred: Int?, minusOnes = 0
        for i in out.indices where out[i] == -1 {
            minusOnes += 1
            inferred = i
        }
        guard minusOnes <= 1 else { throw KernelError("reshape: shape \(to) has \(minusOnes) dimensions of -1 (at most one allowed)") }
        let total = product(from)
        if let k = inferred {
            let restCount = product(out.indices.lazy.filter { $0 != k }.map { out[$0] })
            guard restCount > 0, total % restCount == 0 else {
                throw KernelError("reshape: cannot infer -1 in shape \(to) for input shape \(from) (\(total) elements)")
            }
            out[k] = total / restCount
        }
        guard product(out) == total else {
            throw KernelError("reshape: shape \(to) (\(product(out)) elements) does not match input shape \(from) (\(total) elements)")
        }
        return out
    }

    /// `reshape(x, shape)`.
    static func reshape(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        var x = try inv.tensor("x")
        x.shape = try resolveReshape(from: x.shape, to: try inv.ints("shape"))
        return [.tensor(x)]
    }

    /// iOS16 `reshape_like(x, ref_tensors, begins, ends, end_masks)`: the output shape is the
    /// concatenation of `ref_tensors[i].shape[begins[i]:ends[i]]` (`[begins[i]:]` with end_mask).
    static func reshapeLike(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        var x = try inv.tensor("x")
        guard let refs = inv.all("ref_tensors") else { throw KernelError("missing input 'ref_tensors'") }
        let begins = try flatInts(inv, "begins"), ends = try flatInts(inv, "ends"), masks = try flatBools(inv, "end_masks")
        guard begins.count == refs.count, ends.count == refs.count, masks.count == refs.count else {
            throw KernelError("reshape_like: \(refs.count) ref_tensors but \(begins.count) begins, \(ends.count) ends, \(masks.count) end_masks")
        }
        var shape: [Int] = []
        for (i, ref) in refs.enumerated() {
            let s: [Int]
            switch ref {
            case let .quantized(q): s = q.shape
            default: s = try ref.dense().shape
            }
            func clampIndex(_ v: Int) -> Int { min(max(v < 0 ? v + s.count : v, 0), s.count) }
            let b = clampIndex(begins[i]), e = masks[i] ? s.count : clampIndex(ends[i])
            if b < e { shape += s[b..<e] }
        }
        guard product(shape) == x.count else {
            throw KernelError("reshape_like: output shape \(shape) does not match input shape \(x.shape)")
        }
        x.shape = shape
        return [.tensor(x)]
    }

    /// `expand_dims(x, axes)`: a size-1 dimension at each axis of the output (negative axes count
    /// from the end of the output rank).
    static func expandDims(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        var x = try inv.tensor("x")
        let axes = try inv.ints("axes")
        let outRank = x.rank + axes.count
        var set = Set<Int>()
        for a in axes {
            let n = try axis(a, count: outRank, "expand_dims axis")
            guard set.insert(n).inserted else { throw KernelError("expand_dims: axis \(a) (output axis \(n)) repeated in \(axes)") }
        }
        var shape: [Int] = []
        var next = 0
        for i in 0..<outRank {
            if set.contains(i) { shape.append(1) } else { shape.append(x.shape[next]); next += 1 }
        }
        x.shape = shape
        return [.tensor(x)]
    }

    /// `squeeze(x, axes?)`: drops the listed size-1 axes (listed axes of another size are kept,
    /// as PyTorch does), or every size-1 axis when `axes` is absent.
    static func squeeze(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        var x = try inv.tensor("x")
        if inv.has("axes") {
            let axes = try Set(inv.ints("axes").map { try axis($0, count: x.rank, "squeeze axis") })
            x.shape = x.shape.enumerated().filter { !(axes.contains($0.offset) && $0.element == 1) }.map(\.element)
        } else {
            x.shape = x.shape.filter { $0 != 1 }
        }
        return [.tensor(x)]
    }

    /// `flatten2d(x, axis = 1)`: `[prod(shape[:axis]), prod(shape[axis:])]`, axis in `-rank...rank`.
    static func flatten2d(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        var x = try inv.tensor("x")
        let a = try inv.int("axis", default: 1)
        let n = a < 0 ? a + x.rank : a
        guard n >= 0, n <= x.rank else { throw KernelError("flatten2d: axis \(a) out of range for rank \(x.rank)") }
        x.shape = [product(x.shape[..<n]), product(x.shape[n...])]
        return [.tensor(x)]
    }

    /// `identity(x)`: the value itself (tensors, compressed tensors and lists alike).
    /// `shape(x)`: int32 `[rank]`.
    static func shape(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let s: [Int]
        switch try inv.value("x") {
        case let .quantized(q): s = q.shape
        case let .state(st): s = st.shape
        case let v: s = try v.dense().shape
        }
        return [.tensor(Tensor(.int32, shape: [s.count], ints: BufferPool.build(s.count) { p in
            for (i, d) in s.enumerated() { (p + i).initialize(to: Int32(clamping: d)) }
        }))]
    }

    // MARK: - permutations

    /// `transpose(x, perm)`: `out.shape[i] = x.shape[perm[i]]`.
    static func transpose(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let perm = try inv.ints("perm").map { try axis($0, count: x.rank, "perm entry") }
        // A permutation: every axis once (a bit set for ranks up to 64, no hashing per call).
        var distinct = perm.count == x.rank
        if distinct, perm.count <= 64 {
            var seen: UInt64 = 0
            for a in perm {
                let bit: UInt64 = 1 << UInt64(a)
                if seen & bit != 0 { distinct = false; break }
                seen |= bit
            }
        } else if distinct {
            distinct = Set(perm).count == perm.count
        }
        guard distinct else {
            throw KernelError("transpose: perm \(try inv.ints("perm")) is not a permutation of \(x.rank) axes")
        }
        if perm.indices.allSatisfy({ perm[$0] == $0 }) { return [.tensor(x)] }
        // Only size-1 axes move (a decode step's [1, 1, H, D] → [1, H, 1, D]): the same elements
        // in the same order, so the storage is shared, as `reshape` shares it.
        var inOrder = true, last = -1
        for a in perm where x.shape[a] != 1 {
            if a < last { inOrder = false; break }
            last = a
        }
        if inOrder {
            var y = x
            y.shape = perm.map { x.shape[$0] }
            return [.tensor(y)]
        }
        let strides = contiguousStrides(x.shape)
        return [.tensor(try view(x, shape: perm.map { x.shape[$0] }, offset: 0, strides: perm.map { strides[$0] }))]
    }

    /// `reverse(x, axes?)`: flips the listed axes (all when absent; an axis listed twice flips back).
    static func reverse(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        var flip = [Bool](repeating: !inv.has("axes"), count: x.rank)
        if inv.has("axes") {
            for a in try inv.ints("axes") { let n = try axis(a, count: x.rank, "reverse axis"); flip[n].toggle() }
        }
        var strides = contiguousStrides(x.shape)
        var offset = 0
        for i in 0..<x.rank where flip[i] && x.shape[i] > 0 {
            offset += (x.shape[i] - 1) * strides[i]
            strides[i] = -strides[i]
        }
        return [.tensor(try view(x, shape: x.shape, offset: offset, strides: strides))]
    }

    /// `tile(x, reps)`: dimension i repeated `reps[i]` times (one copy with zero source strides).
    static func tile(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let reps = try inv.ints("reps")
        guard reps.count == x.rank else { throw KernelError("tile: reps \(reps) must have one entry per dimension of x \(x.shape)") }
        if let bad = reps.firstIndex(where: { $0 <= 0 }) { throw KernelError("tile: reps[\(bad)] = \(reps[bad]), must be > 0") }
        var outShape: [Int] = []
        for (d, r) in zip(x.shape, reps) {
            let (m, o) = d.multipliedReportingOverflow(by: r)
            guard !o else { throw KernelError("tile: reps \(reps) of shape \(x.shape) overflow the element count") }
            outShape.append(m)
        }
        try KernelError.checkAllocation(CheckedSize.elementCount(outShape), shape: outShape)
        let inStrides = contiguousStrides(x.shape), outStrides = contiguousStrides(outShape)
        var shape: [Int] = [], ss: [Int] = [], ds: [Int] = []
        for i in 0..<x.rank {
            shape += [reps[i], x.shape[i]]
            ss += [0, inStrides[i]]
            ds += [x.shape[i] * outStrides[i], outStrides[i]]
        }
        let r = Region(shape: shape, source: 0, srcOffset: 0, srcStrides: ss, dstOffset: 0, dstStrides: ds)
        return [.tensor(tensor(like: x, shape: outShape, data: try assemble([x.data], count: product(outShape), fill: nil, regions: [r])))]
    }

    // MARK: - concat / stack / split

    /// `concat(values, axis, interleave = false)`. Rank-0 values are joined into a vector.
    static func concat(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        var values = try inv.tensors("values")
        guard !values.isEmpty else { throw KernelError("concat: no values") }
        for i in values.indices where values[i].rank == 0 { values[i].shape = [1] }
        let rank = values[0].rank
        let ax = try axis(try inv.int("axis"), count: rank, "concat axis")
        let interleave = try inv.bool("interleave", default: false)
        for v in values {
            guard v.rank == rank else { throw KernelError("concat: value of shape \(v.shape) has rank \(v.rank), the first has \(values[0].shape)") }
            for i in 0..<rank where (i != ax || interleave) && v.shape[i] != values[0].shape[i] {
                throw KernelError("concat: shapes \(values[0].shape) and \(v.shape) differ on axis \(i)\(interleave ? " (interleave needs equal shapes)" : "")")
            }
        }
        if values.count == 1 { return [.tensor(values[0])] }
        var outShape = values[0].shape
        outShape[ax] = values.reduce(0) { $0 + $1.shape[ax] }
        let outStrides = contiguousStrides(outShape)
        var regions: [Region] = []
        var offset = 0
        for (k, v) in values.enumerated() {
            var ds = outStrides
            let dstOffset: Int
            if interleave {
                ds[ax] = outStrides[ax] * values.count
                dstOffset = k * outStrides[ax]
            } else {
                dstOffset = offset * outStrides[ax]
                offset += v.shape[ax]
            }
            regions.append(Region(shape: v.shape, source: k, srcOffset: 0, srcStrides: contiguousStrides(v.shape), dstOffset: dstOffset, dstStrides: ds))
        }
        let data = try assemble(values.map(\.data), count: product(outShape), fill: nil, regions: regions)
        return [.tensor(tensor(like: values[0], shape: outShape, data: data))]
    }

    /// `stack(values, axis)`: equal shapes, a new axis of size `values.count` at `axis` (`-(rank+1)...rank`).
    static func stack(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let values = try inv.tensors("values")
        guard let first = values.first else { throw KernelError("stack: no values") }
        for v in values where v.shape != first.shape {
            throw KernelError("stack: shapes \(first.shape) and \(v.shape) differ")
        }
        let ax = try axis(try inv.int("axis"), count: first.rank + 1, "stack axis")
        var outShape = first.shape
        outShape.insert(values.count, at: ax)
        let outStrides = contiguousStrides(outShape)
        var ds = outStrides
        ds.remove(at: ax)
        let regions = values.indices.map {
            Region(shape: first.shape, source: $0, srcOffset: 0, srcStrides: contiguousStrides(first.shape),
                   dstOffset: $0 * outStrides[ax], dstStrides: ds)
        }
        let data = try assemble(values.map(\.data), count: product(outShape), fill: nil, regions: regions)
        return [.tensor(tensor(like: first, shape: outShape, data: data))]
    }

    /// `split(x, num_splits?, split_sizes?, axis)`: one output per piece.
    static func split(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let ax = try axis(try inv.int("axis"), count: x.rank, "split axis")
        let dim = x.shape[ax]
        var sizes: [Int]
        if inv.has("split_sizes") {
            sizes = try inv.ints("split_sizes")
            if inv.has("num_splits"), try inv.int("num_splits") != sizes.count {
                throw KernelError("split: num_splits \(try inv.int("num_splits")) differs from split_sizes \(sizes)")
            }
            guard sizes.allSatisfy({ $0 >= 0 }), sizes.reduce(0, +) == dim else {
                throw KernelError("split: split_sizes \(sizes) must be non-negative and sum to dimension \(ax) of size \(dim)")
            }
        } else if inv.has("num_splits") {
            let n = try inv.int("num_splits")
            guard n > 0, dim % n == 0 else { throw KernelError("split: num_splits \(n) does not divide dimension \(ax) of size \(dim)") }
            sizes = [Int](repeating: dim / n, count: n)
        } else {
            throw KernelError("split: needs num_splits or split_sizes")
        }
        let strides = contiguousStrides(x.shape)
        var outs: [RuntimeValue] = []
        var start = 0
        for s in sizes {
            var shape = x.shape
            shape[ax] = s
            outs.append(.tensor(try view(x, shape: shape, offset: start * strides[ax], strides: strides)))
            start += s
        }
        return outs
    }

    // MARK: - pad

    /// `pad(x, pad, mode = "constant", constant_val = 0)`: `pad` is `[before, after]` for each of
    /// the last `pad.count / 2` dimensions. `reflect` mirrors without repeating the edge (pad ≤
    /// dim − 1), `replicate` repeats the edge.
    static func pad(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let p = try inv.ints("pad")
        let mode = try inv.string("mode", default: "constant")
        guard ["constant", "reflect", "replicate"].contains(mode) else {
            throw KernelError("pad: mode '\(mode)' (expected constant, reflect or replicate)")
        }
        guard p.count % 2 == 0, p.count / 2 <= x.rank else {
            throw KernelError("pad: \(p.count) pad values for rank \(x.rank) (need an even count ≤ \(2 * x.rank))")
        }
        if let bad = p.firstIndex(where: { $0 < 0 }) { throw KernelError("pad: pad[\(bad)] = \(p[bad]) is negative") }
        let lead = x.rank - p.count / 2
        var before = [Int](repeating: 0, count: x.rank), after = before
        for i in 0..<(p.count / 2) {
            before[lead + i] = p[2 * i]
            after[lead + i] = p[2 * i + 1]
        }
        for i in 0..<x.rank where before[i] > 0 || after[i] > 0 {
            let d = x.shape[i]
            if mode == "reflect", before[i] > d - 1 || after[i] > d - 1 {
                throw KernelError("pad: reflect padding \(before[i])/\(after[i]) on dimension \(i) of size \(d) (at most \(max(d - 1, 0)))")
            }
            if mode == "replicate", d == 0 {
                throw KernelError("pad: replicate padding on empty dimension \(i)")
            }
        }
        let outShape = (0..<x.rank).map { x.shape[$0] + before[$0] + after[$0] }
        let os = contiguousStrides(outShape)
        let interiorOffset = (0..<x.rank).reduce(0) { $0 + before[$1] * os[$1] }
        var regions = [Region(shape: x.shape, source: 0, srcOffset: 0, srcStrides: contiguousStrides(x.shape),
                              dstOffset: interiorOffset, dstStrides: os)]
        if mode != "constant" {
            // Fill borders one dimension at a time from hyperplanes already written: dimensions
            // done so far span their full padded extent, the others only their interior.
            var done = [Bool](repeating: false, count: x.rank)
            for d in 0..<x.rank {
                let n = x.shape[d]
                var plane: [Int] = [], base = 0
                for j in 0..<x.rank where j != d {
                    plane.append(done[j] ? outShape[j] : x.shape[j])
                    if !done[j] { base += before[j] * os[j] }
                }
                var pstrides = os
                pstrides.remove(at: d)
                func source(_ o: Int) -> Int {
                    let k = o - before[d]  // position relative to the input
                    if mode == "replicate" { return before[d] + min(max(k, 0), n - 1) }
                    return before[d] + (k < 0 ? -k : 2 * (n - 1) - k)
                }
                for o in Array(0..<before[d]) + Array((before[d] + n)..<(before[d] + n + after[d])) {
                    regions.append(Region(shape: plane, source: -1, srcOffset: base + source(o) * os[d], srcStrides: pstrides,
                                          dstOffset: base + o * os[d], dstStrides: pstrides))
                }
                done[d] = true
            }
        }
        let cv = mode == "constant" ? try inv.optionalTensor("constant_val").map { $0.floats.first ?? 0 } ?? 0 : 0
        let data = try assemble([x.data], count: product(outShape), fill: cv, regions: regions)
        return [.tensor(tensor(like: x, shape: outShape, data: data))]
    }

    // MARK: - space / depth

    static func rank4(_ x: Tensor, _ op: String) throws -> (Int, Int, Int, Int) {
        guard x.rank == 4 else { throw KernelError("\(op): x must have rank 4 [N, C, H, W], has shape \(x.shape)") }
        return (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
    }

    /// `depth_to_space(x, block_size)` (TensorFlow / DCR order, NCHW):
    /// `out[n, c, h·b + i, w·b + j] = x[n, (i·b + j)·C' + c, h, w]`, `C' = C / b²`.
    static func depthToSpace(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        try channelsToSpace(inv, "depth_to_space", factor: "block_size", channelMajor: false)
    }

    /// `depth_to_space` and `pixel_shuffle`: `out[n, c, h·b + i, w·b + j]` is x at channel
    /// `(i·b + j)·C' + c` (`channelMajor` false: DCR) or `c·b² + i·b + j` (true: CRD),
    /// `C' = C / b²`, b the `factor` input. A strided view of x.
    static func channelsToSpace(_ inv: KernelInvocation, _ op: String, factor: String, channelMajor: Bool) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let (n, c, h, w) = try rank4(x, op)
        let b = try inv.int(factor)
        guard b >= 1, c % (b * b) == 0 else { throw KernelError("\(op): channels \(c) not divisible by \(factor)² (\(b)²)") }
        let co = c / (b * b), hw = h * w
        // x's strides along c, i and j.
        let (sc, si, sj) = channelMajor ? (b * b * hw, b * hw, hw) : (hw, b * co * hw, co * hw)
        // Output viewed as [N, C', H, b_i, W, b_j].
        return [.tensor(try view(x, shape: [n, co, h, b, w, b], offset: 0,
                                 strides: [c * hw, sc, w, si, 1, sj], resultShape: [n, co, h * b, w * b]))]
    }

    /// `space_to_depth(x, block_size)`, the inverse of ``depthToSpace(_:)``:
    /// `out[n, (i·b + j)·C + c, h, w] = x[n, c, h·b + i, w·b + j]`.
    static func spaceToDepth(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let (n, c, h, w) = try rank4(x, "space_to_depth")
        let b = try inv.int("block_size")
        guard b >= 1, h % b == 0, w % b == 0 else { throw KernelError("space_to_depth: H \(h) and W \(w) must be divisible by block_size \(b)") }
        let ho = h / b, wo = w / b
        // Output viewed as [N, b_i, b_j, C, H', W'].
        return [.tensor(try view(x, shape: [n, b, b, c, ho, wo], offset: 0,
                                 strides: [c * h * w, w, 1, h * w, b * w, b], resultShape: [n, c * b * b, ho, wo]))]
    }

    /// `pixel_shuffle(x, upscale_factor)` (PyTorch / CRD order):
    /// `out[n, c, h·f + i, w·f + j] = x[n, c·f² + i·f + j, h, w]`.
    static func pixelShuffle(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        try channelsToSpace(inv, "pixel_shuffle", factor: "upscale_factor", channelMajor: true)
    }

    /// `sliding_windows(x, axis, size, stride = 1)`: dimension `axis` becomes
    /// `[(d − size) / stride + 1, size]`.
    static func slidingWindows(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let ax = try axis(try inv.int("axis"), count: x.rank, "sliding_windows axis")
        let size = try inv.int("size"), stride = try inv.int("stride", default: 1)
        let d = x.shape[ax]
        guard size >= 1, stride >= 1, size <= d else {
            throw KernelError("sliding_windows: size \(size), stride \(stride) invalid for dimension \(ax) of size \(d)")
        }
        let count = (d - size) / stride + 1
        var shape = x.shape, strides = contiguousStrides(x.shape)
        shape[ax] = count
        shape.insert(size, at: ax + 1)
        strides.insert(strides[ax], at: ax + 1)
        strides[ax] *= stride
        return [.tensor(try view(x, shape: shape, offset: 0, strides: strides))]
    }

    // MARK: - constructors

    /// `fill(shape, value = 0.0)`: dtype as declared for the output.
    static func fill(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let shape = try inv.ints("shape")
        if let bad = shape.first(where: { $0 < 0 }) { throw KernelError("fill: negative dimension \(bad) in shape \(shape)") }
        let dt = inv.outputDType()
        return [.tensor(try filled(dt, shape: shape, value: scalarData(try inv.optionalTensor("value"), default: 0)))]
    }

    /// iOS16 `fill_like(ref_tensor, value = 0.0)`.
    static func fillLike(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let shape: [Int]
        switch try inv.value("ref_tensor") {
        case let .quantized(q): shape = q.shape
        case let v: shape = try v.dense().shape
        }
        let dt = inv.outputDType()
        return [.tensor(try filled(dt, shape: shape, value: scalarData(try inv.optionalTensor("value"), default: 0)))]
    }

    /// `range_1d(end, start, step)`: `start + i·step` for `i < ceil((end − start) / step)`.
    static func range1d(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let end = try inv.tensor("end"), start = try inv.tensor("start"), step = try inv.tensor("step")
        for (n, t) in [("end", end), ("start", start), ("step", step)] where t.count != 1 {
            throw KernelError("range_1d: \(n) must be a scalar, has shape \(t.shape)")
        }
        let dt = inv.outputDType()
        if !dt.isFloat {
            let s = Int(start.ints[0]), e = Int(end.ints[0]), st = Int(step.ints[0])
            guard st != 0 else { throw KernelError("range_1d: step is 0") }
            let diff = e - s
            let n = (diff == 0 || (diff > 0) != (st > 0)) ? 0 : (abs(diff) + abs(st) - 1) / abs(st)
            try KernelError.checkAllocation(n, shape: [n])
            return [.tensor(Tensor(dt.isInteger ? dt : .int32, shape: [n], ints: BufferPool.build(n) { p in
                for i in 0..<n { (p + i).initialize(to: Int32(truncatingIfNeeded: s + i * st)) }
            }))]
        }
        let s = Double(start.floats[0]), e = Double(end.floats[0]), st = Double(step.floats[0])
        guard st != 0 else { throw KernelError("range_1d: step is 0") }
        guard s.isFinite, e.isFinite, st.isFinite else { throw KernelError("range_1d: non-finite start \(s), end \(e) or step \(st)") }
        let len = ((e - s) / st).rounded(.up)
        guard len < Double(Int32.max) else { throw KernelError("range_1d: \(len) elements") }
        let n = max(0, Int(len))
        try KernelError.checkAllocation(n, shape: [n])
        return [.tensor(Tensor(dt.isFloat ? dt : .fp32, shape: [n], floats: BufferPool.build(n) { p in
            for i in 0..<n { (p + i).initialize(to: Float(s + Double(i) * st)) }
        }))]
    }

    /// `band_part(x, lower = -1, upper = -1)`: keeps `(lower < 0 || m − n ≤ lower) &&
    /// (upper < 0 || n − m ≤ upper)` over the last two dimensions, zero elsewhere.
    static func bandPart(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        guard x.rank >= 2 else { throw KernelError("band_part: x must have rank ≥ 2, has shape \(x.shape)") }
        let lower = try inv.int("lower", default: -1), upper = try inv.int("upper", default: -1)
        let rows = x.shape[x.rank - 2], cols = x.shape[x.rank - 1]
        let batches = rows * cols == 0 ? 0 : x.count / (rows * cols)
        func go<T>(_ a: [T], _ zero: T) -> [T] {
            var out = a
            for bIdx in 0..<batches {
                let base = bIdx * rows * cols
                for m in 0..<rows {
                    for n in 0..<cols where !((lower < 0 || m - n <= lower) && (upper < 0 || n - m <= upper)) {
                        out[base + m * cols + n] = zero
                    }
                }
            }
            return out
        }
        let data = map(x.data, { go($0, 0) }, { go($0, 0) }, { go($0, false) }, { go($0, "") })
        return [.tensor(tensor(like: x, shape: x.shape, data: data))]
    }

    /// `one_hot(indices, one_hot_vector_size, axis = -1, on_value = 1, off_value = 0)`. As in
    /// TensorFlow (which the op follows), an index outside `0..<size` gives a row of `off_value`.
    static func oneHot(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let indices = try inv.tensor("indices")
        let depth = try inv.int("one_hot_vector_size")
        guard depth >= 0 else { throw KernelError("one_hot: one_hot_vector_size \(depth) is negative") }
        let a = try inv.int("axis", default: -1)
        let r = indices.rank
        let cut = a < 0 ? r + a + 1 : a
        guard cut >= 0, cut <= r else { throw KernelError("one_hot: axis \(a) out of range for indices of rank \(r)") }
        let dt = inv.outputDType()
        let on = scalarData(try inv.optionalTensor("on_value"), default: 1)
        let off = scalarData(try inv.optionalTensor("off_value"), default: 0)
        var outShape = indices.shape
        outShape.insert(depth, at: cut)
        let outer = product(indices.shape[..<cut]), inner = product(indices.shape[cut...])
        var t = try filled(dt, shape: outShape, value: off)
        var positions: [Int] = []
        let idx = indices.ints
        for o in 0..<outer {
            for i in 0..<inner {
                let v = Int(idx[o * inner + i])
                if v >= 0, v < depth { positions.append((o * depth + v) * inner + i) }
            }
        }
        switch t.data {
        case var .float(arr): for p in positions { arr[p] = on.float }; t.data = .float(arr)
        case var .int(arr): for p in positions { arr[p] = on.int }; t.data = .int(arr)
        case var .bool(arr): for p in positions { arr[p] = on.bool }; t.data = .bool(arr)
        case .string: throw KernelError("one_hot: string output")
        }
        return [.tensor(t)]
    }
}
