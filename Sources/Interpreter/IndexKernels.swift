import GraphIR

/// Indexing ops (MIL `tensor_transformation` slicing, `scatter_gather`, parts of
/// `tensor_operation`): slice_by_index, slice_by_size, gather, gather_along_axis, gather_nd,
/// scatter, scatter_along_axis, scatter_nd, non_zero, topk, argsort, cumsum.
///
/// Indices may be negative (counted from the end, as iOS15/16 allow; iOS17 leaves them
/// undefined). An index outside `-d..<d` throws a ``KernelError`` naming the index, the axis and
/// its size, whether or not `validate_indices` is set.
enum IndexKernels {
    static let table: [String: Kernel] = [
        "slice_by_index": sliceByIndex,
        "slice_by_size": sliceBySize,
        "gather": gather,
        "gather_along_axis": gatherAlongAxis,
        "gather_nd": gatherND,
        "scatter": scatter,
        "scatter_along_axis": scatterAlongAxis,
        "scatter_nd": scatterND,
        "non_zero": nonZero,
        "topk": topk,
        "argsort": argsort,
        "cumsum": cumsum,
    ]

    typealias S = ShapeKernels

    /// `v` wrapped into `0..<n` (negative counts from the end), or an error naming the axis.
    @inline(__always)
    /// Flat offsets into `x` (`[outer, d, inner]`) of an along-axis index tensor
    /// (`[outer, n, inner]`, row-major): `(o·d + wrap(index))·inner + q`.
    /// - Throws: `KernelError` for an index outside `[-d, d)` (`[0, d)` when `nonNegative`).
    static func alongAxisOffsets(_ raw: [Int32], outer: Int, n: Int, d: Int, inner: Int, op: String, axis: Int,
                                 nonNegative: Bool = false) throws -> [Int] {
        var offsets = [Int](repeating: 0, count: raw.count)
        var k = 0
        for o in 0..<outer {
            for _ in 0..<n {
                for q in 0..<inner {
                    offsets[k] = (o * d + (try wrap(raw[k], d, op: op, axis: axis, nonNegative: nonNegative))) * inner + q
                    k += 1
                }
            }
        }
        return offsets
    }

    /// `v` wrapped into `0..<n`; with `nonNegative` (the iOS17 scatter ops, whose negative indices
    /// ``refuseNegative(_:_:op:)`` refuses first) the error states the range `0...n-1` they accept.
    /// - Throws: `KernelError` naming the op, the axis, its size and the accepted range.
    static func wrap(_ v: Int32, _ n: Int, op: String, axis: Int, nonNegative: Bool = false) throws -> Int {
        let i = v < 0 ? Int(v) + n : Int(v)
        guard i >= 0, i < n else {
            if nonNegative {
                throw KernelError("\(op): index \(v) out of range for axis \(axis) of size \(n) (\(n == 0 ? "the axis is empty" : "valid: 0...\(n - 1)"))")
            }
            throw KernelError("\(op): index \(v) out of range for axis \(axis) of size \(n) (valid: \(-n)...\(n - 1))")
        }
        return i
    }

    /// iOS17 scatter ops (they carry `validate_indices`) take only indices ≥ 0: a negative index
    /// is out of bounds (MIL op reference, iOS17 `scatter_gather`), so it is refused.
    static func refuseNegative(_ inv: KernelInvocation, _ ind: Tensor, op: String) throws {
        guard inv.has("validate_indices"), let v = ind.ints.first(where: { $0 < 0 }) else { return }
        throw KernelError("\(op): index \(v) is negative; from iOS17 scatter indices must be >= 0")
    }

    /// Runs of `inner` elements of `a` starting at each of `offsets`, concatenated.
    static func collect<T>(_ a: [T], inner: Int, offsets: [Int]) -> [T] {
        let count = offsets.count * inner
        guard count > 0 else { return [] }
        return a.withUnsafeBufferPointer { src in
            BufferPool.build(count) { d in
                let s = src.baseAddress!
                if inner == 1 {
                    for (k, o) in offsets.enumerated() { (d + k).initialize(to: s[o]) }
                } else {
                    for (k, o) in offsets.enumerated() { (d + k * inner).initialize(from: s + o, count: inner) }
                }
            }
        }
    }

    static func collect(_ x: Tensor, shape: [Int], inner: Int, offsets: [Int]) -> Tensor {
        func go<T>(_ a: [T]) -> [T] { collect(a, inner: inner, offsets: offsets) }
        return S.tensor(like: x, shape: shape, data: S.map(x.data, go, go, go, go))
    }

    // MARK: - slicing

    /// `slice_by_index(x, begin, end, stride?, begin_mask?, end_mask?, squeeze_mask?)`: the
    /// region ``SliceRegion`` resolves (the same one `slice_update` writes), as a strided view.
    static func sliceByIndex(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let s = try SliceRegion(inv, shape: x.shape)
        let strides = contiguousStrides(x.shape)
        var offset = 0
        for a in 0..<x.rank where s.lengths[a] > 0 { offset += s.starts[a] * strides[a] }
        return [.tensor(try S.view(x, shape: s.lengths, offset: offset, strides: zip(s.steps, strides).map(*), resultShape: s.resultShape))]
    }

    /// `slice_by_size(x, begin, size)`: `size[i] == -1` takes the rest of the axis; negative
    /// `begin` counts from the end. The slice must lie inside `x`.
    static func sliceBySize(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let begin = try inv.ints("begin"), size = try inv.ints("size")
        guard begin.count == x.rank, size.count == x.rank else {
            throw KernelError("slice_by_size: begin has \(begin.count) and size \(size.count) entries, x has rank \(x.rank)")
        }
        var starts: [Int] = [], lengths: [Int] = []
        for a in 0..<x.rank {
            let n = x.shape[a]
            let b = begin[a] < 0 ? begin[a] + n : begin[a]
            guard b >= 0, b <= n else { throw KernelError("slice_by_size: begin \(begin[a]) out of range for axis \(a) of size \(n)") }
            let l = size[a] == -1 ? n - b : size[a]
            guard l >= 0, b + l <= n else {
                throw KernelError("slice_by_size: size \(size[a]) from begin \(begin[a]) exceeds axis \(a) of size \(n)")
            }
            starts.append(b); lengths.append(l)
        }
        let strides = contiguousStrides(x.shape)
        let offset = zip(starts, strides).reduce(0) { $0 + $1.0 * $1.1 }
        return [.tensor(try S.view(x, shape: lengths, offset: offset, strides: strides))]
    }

    // MARK: - gather

    /// `gather(x, indices, axis = 0, batch_dims = 0)`: output shape
    /// `x.shape[:axis] + indices.shape[batch_dims:] + x.shape[axis+1:]`.
    static func gather(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x"), ind = try inv.tensor("indices")
        let ax = try S.axis(try inv.int("axis", default: 0), count: x.rank, "gather axis")
        var b = try inv.int("batch_dims", default: 0)
        if b < 0 { b += ind.rank }
        guard b >= 0, b <= ind.rank, b <= ax else {
            throw KernelError("gather: batch_dims \(try inv.int("batch_dims", default: 0)) invalid for axis \(ax), indices rank \(ind.rank)")
        }
        guard Array(x.shape[..<b]) == Array(ind.shape[..<b]) else {
            throw KernelError("gather: batch dimensions of x \(x.shape) and indices \(ind.shape) differ")
        }
        let outShape = Array(x.shape[..<ax]) + Array(ind.shape[b...]) + Array(x.shape[(ax + 1)...])
        let batch = S.product(x.shape[..<b]), mid = S.product(x.shape[b..<ax]), d = x.shape[ax]
        let inner = S.product(x.shape[(ax + 1)...]), nIdx = S.product(ind.shape[b...])
        let idx = try ind.ints.map { try wrap($0, d, op: "gather", axis: ax) }
        var offsets: [Int] = []
        offsets.reserveCapacity(batch * mid * nIdx)
        for bi in 0..<batch {
            for m in 0..<mid {
                let base = (bi * mid + m) * d
                for j in 0..<nIdx { offsets.append((base + idx[bi * nIdx + j]) * inner) }
            }
        }
        return [.tensor(collect(x, shape: outShape, inner: inner, offsets: offsets))]
    }

    /// `gather_along_axis(x, indices, axis = 0)`: `out[p, i, q] = x[p, indices[p, i, q], q]`;
    /// `indices` has the rank of `x` and its sizes off `axis`.
    static func gatherAlongAxis(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x"), ind = try inv.tensor("indices")
        let ax = try S.axis(try inv.int("axis", default: 0), count: x.rank, "gather_along_axis axis")
        try checkAlongAxis(x.shape, ind.shape, ax, "gather_along_axis", what: "indices")
        let d = x.shape[ax], inner = S.product(x.shape[(ax + 1)...])
        let n = ind.shape[ax], outer = S.product(x.shape[..<ax])
        let offsets = try alongAxisOffsets(ind.ints, outer: outer, n: n, d: d, inner: inner, op: "gather_along_axis", axis: ax)
        return [.tensor(collect(x, shape: ind.shape, inner: 1, offsets: offsets))]
    }

    static func checkAlongAxis(_ x: [Int], _ i: [Int], _ ax: Int, _ op: String, what: String) throws {
        guard x.count == i.count, (0..<x.count).allSatisfy({ $0 == ax || x[$0] == i[$0] }) else {
            throw KernelError("\(op): \(what) shape \(i) must match x/data shape \(x) except on axis \(ax)")
        }
    }

    /// Flat offsets (in units of elements) of the slices `indices[..., :]` address, for
    /// gather_nd / scatter_nd: `indices.shape[-1] = K` indexes axes `b..<b+K` of `shape`
    /// (`nonNegative`: the iOS17 scatter_nd, see ``wrap(_:_:op:axis:nonNegative:)``).
    static func ndOffsets(shape: [Int], indices ind: Tensor, batchDims b: Int, op: String,
                          nonNegative: Bool = false) throws -> (offsets: [Int], inner: Int) {
        guard ind.rank >= 1 else { throw KernelError("\(op): indices must have rank ≥ 1, has shape \(ind.shape)") }
        let k = ind.shape[ind.rank - 1]
        guard b >= 0, b < max(ind.rank, 1), b + k <= shape.count else {
            throw KernelError("\(op): indices shape \(ind.shape) with batch_dims \(b) invalid for shape \(shape)")
        }
        guard Array(shape[..<b]) == Array(ind.shape[..<b]) else {
            throw KernelError("\(op): batch dimensions of \(shape) and indices \(ind.shape) differ")
        }
        let inner = S.product(shape[(b + k)...])
        let sub = Array(shape[b..<(b + k)])
        let subStrides = contiguousStrides(sub).map { $0 * inner }
        let batchStride = S.product(sub) * inner
        let rows = S.product(ind.shape[..<(ind.rank - 1)])
        let rowsPerBatch = S.product(ind.shape[b..<(ind.rank - 1)])
        let raw = ind.ints
        var offsets = [Int](repeating: 0, count: rows)
        for r in 0..<rows {
            var o = rowsPerBatch == 0 ? 0 : (r / rowsPerBatch) * batchStride
            for j in 0..<k { o += try wrap(raw[r * k + j], sub[j], op: op, axis: b + j, nonNegative: nonNegative) * subStrides[j] }
            offsets[r] = o
        }
        return (offsets, inner)
    }

    /// `gather_nd(x, indices, batch_dims = 0)`: output shape
    /// `indices.shape[:-1] + x.shape[batch_dims + indices.shape[-1]:]`.
    static func gatherND(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x"), ind = try inv.tensor("indices")
        let b = try inv.int("batch_dims", default: 0)
        let (offsets, inner) = try ndOffsets(shape: x.shape, indices: ind, batchDims: b, op: "gather_nd")
        let k = ind.shape[ind.rank - 1]
        let outShape = Array(ind.shape.dropLast()) + Array(x.shape[(b + k)...])
        return [.tensor(collect(x, shape: outShape, inner: inner, offsets: offsets))]
    }

    // MARK: - scatter

    enum Mode: String { case update, add, sub, mul, div, max, min }

    static func mode(_ inv: KernelInvocation, _ op: String) throws -> Mode {
        // The reference (coremltools `default_inputs`) defaults to "add".
        let m = try inv.string("mode", default: "add")
        guard let mode = Mode(rawValue: m) else {
            throw KernelError("\(op): mode '\(m)' (expected update, add, sub, mul, div, max or min)")
        }
        return mode
    }

    /// Applies `updates[src[i] ..< src[i]+inner]` onto `data[dst[i] ..< dst[i]+inner]` in order
    /// (a repeated index sees the earlier updates).
    static func scatterApply(data: Tensor, updates: Tensor, dst: [Int], src: [Int], inner: Int, mode: Mode, op: String) throws -> Tensor {
        func run<T>(_ a: [T], _ u: [T], _ f: (T, T) -> T) -> [T] {
            var out = a
            out.withUnsafeMutableBufferPointer { o in
                u.withUnsafeBufferPointer { up in
                    for (d, s) in zip(dst, src) {
                        for j in 0..<inner { o[d + j] = f(o[d + j], up[s + j]) }
                    }
                }
            }
            return out
        }
        var result = data
        switch (data.data, updates.data) {
        case let (.float(a), .float(u)):
            let f: (Float, Float) -> Float
            switch mode {
            case .update: f = { $1 }
            case .add: f = { $0 + $1 }
            case .sub: f = { $0 - $1 }
            case .mul: f = { $0 * $1 }
            case .div: f = { $0 / $1 }
            case .max: f = { Swift.max($0, $1) }
            case .min: f = { Swift.min($0, $1) }
            }
            result.data = .float(run(a, u, f))
        case let (.int(a), .int(u)):
            if mode == .div, u.contains(0) { throw KernelError("\(op): integer division by zero in updates") }
            let f: (Int32, Int32) -> Int32
            switch mode {
            case .update: f = { $1 }
            case .add: f = { $0 &+ $1 }
            case .sub: f = { $0 &- $1 }
            case .mul: f = { $0 &* $1 }
            case .div: f = { $0 == .min && $1 == -1 ? .min : $0 / $1 }
            case .max: f = { Swift.max($0, $1) }
            case .min: f = { Swift.min($0, $1) }
            }
            result.data = .int(run(a, u, f))
        case let (.bool(a), .bool(u)) where mode == .update:
            result.data = .bool(run(a, u, { $1 }))
        default:
            throw KernelError("\(op): data (\(data.dtype)) and updates (\(updates.dtype)) must share a numeric dtype for mode '\(mode.rawValue)'")
        }
        return result
    }

    /// `scatter(data, indices, updates, axis = 0, mode = "add")`: updates shape
    /// `data.shape[:axis] + indices.shape + data.shape[axis+1:]`.
    static func scatter(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let data = try inv.tensor("data"), ind = try inv.tensor("indices"), upd = try inv.tensor("updates")
        let ax = try S.axis(try inv.int("axis", default: 0), count: data.rank, "scatter axis")
        let m = try mode(inv, "scatter")
        let expected = Array(data.shape[..<ax]) + ind.shape + Array(data.shape[(ax + 1)...])
        guard upd.shape == expected else { throw KernelError("scatter: updates shape \(upd.shape), expected \(expected)") }
        let d = data.shape[ax], inner = S.product(data.shape[(ax + 1)...]), outer = S.product(data.shape[..<ax])
        try refuseNegative(inv, ind, op: "scatter")
        let idx = try ind.ints.map { try wrap($0, d, op: "scatter", axis: ax, nonNegative: inv.has("validate_indices")) }
        var dst: [Int] = [], src: [Int] = []
        dst.reserveCapacity(outer * idx.count); src.reserveCapacity(outer * idx.count)
        for o in 0..<outer {
            for (j, i) in idx.enumerated() {
                dst.append((o * d + i) * inner)
                src.append((o * idx.count + j) * inner)
            }
        }
        return [.tensor(try scatterApply(data: data, updates: upd, dst: dst, src: src, inner: inner, mode: m, op: "scatter"))]
    }

    /// `scatter_along_axis(data, indices, updates, axis = 0, mode = "add")`:
    /// `out[p, indices[p, i, q], q] ∘= updates[p, i, q]`.
    static func scatterAlongAxis(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let data = try inv.tensor("data"), ind = try inv.tensor("indices"), upd = try inv.tensor("updates")
        let ax = try S.axis(try inv.int("axis", default: 0), count: data.rank, "scatter_along_axis axis")
        let m = try mode(inv, "scatter_along_axis")
        try checkAlongAxis(data.shape, ind.shape, ax, "scatter_along_axis", what: "indices")
        guard upd.shape == ind.shape else { throw KernelError("scatter_along_axis: updates shape \(upd.shape) differs from indices shape \(ind.shape)") }
        let d = data.shape[ax], inner = S.product(data.shape[(ax + 1)...])
        let n = ind.shape[ax], outer = S.product(data.shape[..<ax])
        try refuseNegative(inv, ind, op: "scatter_along_axis")
        let dst = try alongAxisOffsets(ind.ints, outer: outer, n: n, d: d, inner: inner, op: "scatter_along_axis", axis: ax,
                                       nonNegative: inv.has("validate_indices"))
        return [.tensor(try scatterApply(data: data, updates: upd, dst: dst, src: Array(0..<dst.count), inner: 1, mode: m, op: "scatter_along_axis"))]
    }

    /// `scatter_nd(data, indices, updates, mode = "add")`: updates shape
    /// `indices.shape[:-1] + data.shape[indices.shape[-1]:]`.
    static func scatterND(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let data = try inv.tensor("data"), ind = try inv.tensor("indices"), upd = try inv.tensor("updates")
        let m = try mode(inv, "scatter_nd")
        try refuseNegative(inv, ind, op: "scatter_nd")
        let (offsets, inner) = try ndOffsets(shape: data.shape, indices: ind, batchDims: 0, op: "scatter_nd",
                                                nonNegative: inv.has("validate_indices"))
        let k = ind.shape[ind.rank - 1]
        let expected = Array(ind.shape.dropLast()) + Array(data.shape[k...])
        guard upd.shape == expected else { throw KernelError("scatter_nd: updates shape \(upd.shape), expected \(expected)") }
        return [.tensor(try scatterApply(data: data, updates: upd, dst: offsets, src: offsets.indices.map { $0 * inner },
                                         inner: inner, mode: m, op: "scatter_nd"))]
    }

    // MARK: - non_zero

    /// `non_zero(x)`: int32 `[N, rank]`, the coordinates of each non-zero element in row-major order.
    static func nonZero(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let nz = x.bools
        let strides = contiguousStrides(x.shape)
        var out: [Int32] = []
        var n = 0
        for (i, v) in nz.enumerated() where v {
            var rem = i
            for s in strides { out.append(Int32(rem / s)); rem %= s }
            n += 1
        }
        return [.tensor(Tensor(.int32, shape: [n, x.rank], ints: out))]
    }

    // MARK: - sorting

    /// Per line along `axis`, the element order: stable, NaN last (as numpy's argsort of `x` or
    /// of `-x` for descending, which the reference uses).
    static func sortedOrder(_ x: Tensor, axis ax: Int, ascending: Bool, k: Int) -> [Int] {
        let d = x.shape[ax], inner = S.product(x.shape[(ax + 1)...]), outer = S.product(x.shape[..<ax])
        let vals: [Double]
        switch x.data {
        case let .float(a): vals = a.map(Double.init)
        case let .int(a): vals = a.map(Double.init)
        default: vals = x.floats.map(Double.init)
        }
        var result = [Int](repeating: 0, count: outer * k * inner)
        var line = [Double](repeating: 0, count: d)
        var order = [Int](repeating: 0, count: d)
        for o in 0..<outer {
            for q in 0..<inner {
                let base = o * d * inner + q
                for i in 0..<d { line[i] = vals[base + i * inner]; order[i] = i }
                order.sort { a, b in
                    let va = line[a], vb = line[b]
                    let an = va.isNaN, bn = vb.isNaN
                    if an || bn { return an && bn ? a < b : bn }  // NaN last
                    if va != vb { return ascending ? va < vb : va > vb }
                    return a < b
                }
                for j in 0..<k { result[(o * k + j) * inner + q] = order[j] }
            }
        }
        return result
    }

    /// `topk(x, k = 1, axis = -1, ascending = false, sort = true, return_indices = true,
    /// output_indices_dtype = "int32")`: values and (unless return_indices is false) indices.
    /// `k = -1` takes the whole axis. Ties keep the lower index first; results are always sorted.
    static func topk(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        guard x.rank >= 1 else { throw KernelError("topk: x must have rank ≥ 1") }
        let ax = try S.axis(try inv.int("axis", default: -1), count: x.rank, "topk axis")
        var k = try inv.int("k", default: 1)
        let d = x.shape[ax]
        if k == -1 { k = d }
        guard k >= 0, k <= d else { throw KernelError("topk: k = \(k) out of range for axis \(ax) of size \(d)") }
        let ascending = try inv.bool("ascending", default: false)
        let returnIndices = try inv.bool("return_indices", default: true)
        let idxType = try inv.string("output_indices_dtype", default: "int32")
        guard idxType == "int32" || idxType == "uint16" else { throw KernelError("topk: output_indices_dtype '\(idxType)' (int32 or uint16)") }
        let order = sortedOrder(x, axis: ax, ascending: ascending, k: k)
        let inner = S.product(x.shape[(ax + 1)...])
        var outShape = x.shape
        outShape[ax] = k
        var offsets = [Int](repeating: 0, count: order.count)
        for (i, j) in order.enumerated() {
            let o = i / (k * inner), q = i % inner
            offsets[i] = (o * d + j) * inner + q
        }
        let values = collect(x, shape: outShape, inner: 1, offsets: offsets)
        guard returnIndices else { return [.tensor(values)] }
        let indices = Tensor(idxType == "uint16" ? .uint16 : .int32, shape: outShape, ints: order.map { Int32($0) })
        return [.tensor(values), .tensor(indices)]
    }

    /// `argsort(x, axis = -1, ascending = false)`: int32 indices, stable (ties keep index order).
    static func argsort(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        guard x.rank >= 1 else { throw KernelError("argsort: x must have rank ≥ 1") }
        let ax = try S.axis(try inv.int("axis", default: -1), count: x.rank, "argsort axis")
        let order = sortedOrder(x, axis: ax, ascending: try inv.bool("ascending", default: false), k: x.shape[ax])
        return [.tensor(Tensor(.int32, shape: x.shape, ints: order.map { Int32($0) }))]
    }

    // MARK: - cumsum

    /// `cumsum(x, axis = 0, exclusive = false, reverse = false)`. Floats accumulate in fp32
    /// in order; ints wrap.
    static func cumsum(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        guard x.rank >= 1 else { throw KernelError("cumsum: x must have rank ≥ 1") }
        let ax = try S.axis(try inv.int("axis", default: 0), count: x.rank, "cumsum axis")
        let exclusive = try inv.bool("exclusive", default: false), reverse = try inv.bool("reverse", default: false)
        let d = x.shape[ax], inner = S.product(x.shape[(ax + 1)...]), outer = S.product(x.shape[..<ax])
        func run<T>(_ a: [T], _ zero: T, _ add: (T, T) -> T) -> [T] {
            var out = a
            for o in 0..<outer {
                for q in 0..<inner {
                    let base = o * d * inner + q
                    var acc = zero
                    for step in 0..<d {
                        let i = base + (reverse ? d - 1 - step : step) * inner
                        let v = a[i]
                        if exclusive { out[i] = acc; acc = add(acc, v) } else { acc = add(acc, v); out[i] = acc }
                    }
                }
            }
            return out
        }
        var t = x
        switch x.data {
        case let .float(a): t.data = .float(run(a, 0, +))
        case let .int(a): t.data = .int(run(a, 0, &+))
        case let .bool(a): t = Tensor(.int32, shape: x.shape, ints: run(a.map { $0 ? 1 : 0 }, 0, &+))
        case .string: throw KernelError("cumsum: string tensor")
        }
        return [.tensor(t)]
    }
}

extension SliceRegion {
    /// The region the inputs `begin`, `end`, `stride?`, `begin_mask?`, `end_mask?`,
    /// `squeeze_mask?` of `slice_by_index` / `slice_update` select in a tensor of `shape`.
    init(_ inv: KernelInvocation, shape: [Int]) throws {
        try self.init(shape: shape, begin: try inv.ints("begin"), end: try inv.ints("end"),
                      stride: inv.has("stride") ? try inv.ints("stride") : nil,
                      beginMask: inv.has("begin_mask") ? try inv.bools("begin_mask") : nil,
                      endMask: inv.has("end_mask") ? try inv.bools("end_mask") : nil,
                      squeezeMask: inv.has("squeeze_mask") ? try inv.bools("squeeze_mask") : nil)
    }
}
