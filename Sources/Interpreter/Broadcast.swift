import GraphIR
/// NumPy-style broadcasting (MIL elementwise ops follow numpy's rules): shapes are aligned on
/// their trailing dimensions, and each pair of dimensions must be equal or one of them 1.
///
/// ``Broadcast/binary(_:_:_:_:_:)`` and ``Broadcast/ternary(_:_:_:_:_:_:_:)`` are the fast
/// entry points: they take the same-shape and scalar cases in one straight loop, and otherwise
/// walk a ``BroadcastPlan`` whose innermost run is contiguous (stride 1) or constant (stride 0)
/// in every input. ``Broadcast/referenceBinary(_:_:_:_:_:)`` is the plain per-element index
/// computation, kept for testing the fast paths.
public enum Broadcast {
    /// The broadcast shape of `a` and `b`.
    /// - Throws: `KernelError` when a pair of dimensions differs and neither is 1.
    public static func shape(_ a: [Int], _ b: [Int]) throws -> [Int] {
        let rank = max(a.count, b.count)
        var out = [Int](repeating: 1, count: rank)
        for i in 0..<rank {
            let da = i < rank - a.count ? 1 : a[i - (rank - a.count)]
            let db = i < rank - b.count ? 1 : b[i - (rank - b.count)]
            if da == db || db == 1 {
                out[i] = da
            } else if da == 1 {
                out[i] = db
            } else {
                throw KernelError("shapes \(a) and \(b) cannot be broadcast (dimension \(i) of the result: \(da) vs \(db))")
            }
        }
        if a.count + b.count > 0 { try KernelError.checkAllocation(CheckedSize.elementCount(out), shape: out) }
        return out
    }

    /// The broadcast shape of several shapes.
    public static func shape(_ shapes: [[Int]]) throws -> [Int] {
        var out: [Int] = []
        for s in shapes { out = try shape(out, s) }
        return out
    }

    /// Element strides of `shape` (row-major) seen from `out`: aligned on trailing dimensions,
    /// stride 0 along every dimension that is broadcast (size 1 in `shape`, or absent).
    public static func strides(of shape: [Int], in out: [Int]) -> [Int] {
        var s = [Int](repeating: 0, count: out.count)
        var acc = 1
        let offset = out.count - shape.count
        for i in stride(from: out.count - 1, through: 0, by: -1) {
            let j = i - offset
            if j < 0 { break }
            let d = shape[j]
            s[i] = (d == 1 && out[i] != 1) ? 0 : acc
            acc *= d
        }
        return s
    }

    // MARK: - fast paths

    /// `f(a[i], b[j])` over the broadcast of `a` (shape `sa`) and `b` (shape `sb`).
    @inlinable @inline(__always)
    public static func binary<A, B, R>(_ a: [A], _ sa: [Int], _ b: [B], _ sb: [Int], _ f: (A, B) -> R) throws -> (shape: [Int], data: [R]) {
        let out = try shape(sa, sb)
        let n = out.reduce(1, *)
        guard n > 0 else { return (out, []) }
        guard a.count == sa.reduce(1, *), b.count == sb.reduce(1, *) else {
            throw KernelError("internal: data of \(a.count) and \(b.count) elements for shapes \(sa) and \(sb)")
        }
        let data: [R] = BufferPool.build(n) { po in
            a.withUnsafeBufferPointer { ba in
                b.withUnsafeBufferPointer { bb in
                    let pa = ba.baseAddress!, pb = bb.baseAddress!
                    if a.count == n && b.count == n {
                        for i in 0..<n { (po + i).initialize(to: f(pa[i], pb[i])) }
                    } else if a.count == 1 && b.count == n {
                        let x = pa[0]
                        for i in 0..<n { (po + i).initialize(to: f(x, pb[i])) }
                    } else if b.count == 1 && a.count == n {
                        let y = pb[0]
                        for i in 0..<n { (po + i).initialize(to: f(pa[i], y)) }
                    } else {
                        let plan = BroadcastPlan(out: out, inputs: [sa, sb])
                        let inner = plan.dims[plan.dims.count - 1]
                        let ia = plan.strides[0][plan.dims.count - 1], ib = plan.strides[1][plan.dims.count - 1]
                        plan.forEachRun2 { o, oa, ob in
                            let qo = po + o, qa = pa + oa, qb = pb + ob
                            if ia == 1 && ib == 1 {
                                for i in 0..<inner { (qo + i).initialize(to: f(qa[i], qb[i])) }
                            } else if ia == 0 && ib == 1 {
                                let x = qa[0]
                                for i in 0..<inner { (qo + i).initialize(to: f(x, qb[i])) }
                            } else if ia == 1 && ib == 0 {
                                let y = qb[0]
                                for i in 0..<inner { (qo + i).initialize(to: f(qa[i], y)) }
                            } else {
                                for i in 0..<inner { (qo + i).initialize(to: f(qa[i * ia], qb[i * ib])) }
                            }
                        }
                    }
                }
            }
        }
        return (out, data)
    }

    /// `f(a[i], b[j], c[k])` over the broadcast of three inputs (e.g. `select`).
    @inlinable @inline(__always)
    public static func ternary<A, B, C, R>(_ a: [A], _ sa: [Int], _ b: [B], _ sb: [Int], _ c: [C], _ sc: [Int],
                                           _ f: (A, B, C) -> R) throws -> (shape: [Int], data: [R]) {
        let out = try shape([sa, sb, sc])
        let n = out.reduce(1, *)
        guard n > 0 else { return (out, []) }
        guard a.count == sa.reduce(1, *), b.count == sb.reduce(1, *), c.count == sc.reduce(1, *) else {
            throw KernelError("internal: data sizes do not match shapes \(sa), \(sb), \(sc)")
        }
        let data: [R] = BufferPool.build(n) { po in
            a.withUnsafeBufferPointer { ba in
                b.withUnsafeBufferPointer { bb in
                    c.withUnsafeBufferPointer { bc in
                        let pa = ba.baseAddress!, pb = bb.baseAddress!, pc = bc.baseAddress!
                        if a.count == n && b.count == n && c.count == n {
                            for i in 0..<n { (po + i).initialize(to: f(pa[i], pb[i], pc[i])) }
                        } else if a.count == 1 && b.count == n && c.count == n {
                            let x = pa[0]
                            for i in 0..<n { (po + i).initialize(to: f(x, pb[i], pc[i])) }
                        } else {
                            let plan = BroadcastPlan(out: out, inputs: [sa, sb, sc])
                            let last = plan.dims.count - 1
                            let inner = plan.dims[last]
                            let ia = plan.strides[0][last], ib = plan.strides[1][last], ic = plan.strides[2][last]
                            plan.forEachRun3 { o, oa, ob, oc in
                                let qo = po + o, qa = pa + oa, qb = pb + ob, qc = pc + oc
                                if ia == 1 && ib == 1 && ic == 1 {
                                    for i in 0..<inner { (qo + i).initialize(to: f(qa[i], qb[i], qc[i])) }
                                } else if ia == 1 && ib == 1 && ic == 0 {
                                    let z = qc[0]
                                    for i in 0..<inner { (qo + i).initialize(to: f(qa[i], qb[i], z)) }
                                } else if ia == 1 && ib == 0 && ic == 1 {
                                    let y = qb[0]
                                    for i in 0..<inner { (qo + i).initialize(to: f(qa[i], y, qc[i])) }
                                } else if ia == 0 && ib == 1 && ic == 1 {
                                    let x = qa[0]
                                    for i in 0..<inner { (qo + i).initialize(to: f(x, qb[i], qc[i])) }
                                } else {
                                    for i in 0..<inner { (qo + i).initialize(to: f(qa[i * ia], qb[i * ib], qc[i * ic])) }
                                }
                            }
                        }
                    }
                }
            }
        }
        return (out, data)
    }

    // MARK: - reference

    /// Plain per-element broadcasting: for every output index, the input offsets from its
    /// coordinates. Slow; the reference the fast paths are tested against.
    public static func referenceBinary<A, B, R>(_ a: [A], _ sa: [Int], _ b: [B], _ sb: [Int], _ f: (A, B) -> R) throws -> (shape: [Int], data: [R]) {
        let out = try shape(sa, sb)
        let n = out.reduce(1, *)
        let ta = strides(of: sa, in: out), tb = strides(of: sb, in: out)
        let os = contiguousStrides(out)
        var data: [R] = []
        data.reserveCapacity(n)
        for i in 0..<n {
            var rem = i, ia = 0, ib = 0
            for d in 0..<out.count {
                let c = rem / os[d]
                rem %= os[d]
                ia += c * ta[d]
                ib += c * tb[d]
            }
            data.append(f(a[ia], b[ib]))
        }
        return (out, data)
    }

    /// Reference for ``ternary(_:_:_:_:_:_:_:)``.
    public static func referenceTernary<A, B, C, R>(_ a: [A], _ sa: [Int], _ b: [B], _ sb: [Int], _ c: [C], _ sc: [Int],
                                                    _ f: (A, B, C) -> R) throws -> (shape: [Int], data: [R]) {
        let out = try shape([sa, sb, sc])
        let n = out.reduce(1, *)
        let ta = strides(of: sa, in: out), tb = strides(of: sb, in: out), tc = strides(of: sc, in: out)
        let os = contiguousStrides(out)
        var data: [R] = []
        data.reserveCapacity(n)
        for i in 0..<n {
            var rem = i, ia = 0, ib = 0, ic = 0
            for d in 0..<out.count {
                let k = rem / os[d]
                rem %= os[d]
                ia += k * ta[d]
                ib += k * tb[d]
                ic += k * tc[d]
            }
            data.append(f(a[ia], b[ib], c[ic]))
        }
        return (out, data)
    }
}

/// A broadcast of inputs into `outShape`, with adjacent dimensions merged wherever every input
/// is broadcast the same way along both (so `[B, H, S, D] + [B, 1, S, D]` becomes
/// `[B, H, S·D]`). The last merged dimension is the innermost run; along it each input has
/// stride 1 or 0 (or, only for a size-1 run, anything).
public struct BroadcastPlan {
    public let outShape: [Int]
    /// Merged dimensions, outer to inner; never empty (a scalar result is `[1]`).
    public let dims: [Int]
    /// Per input, the element stride along each merged dimension (0 = broadcast).
    public let strides: [[Int]]

    /// - Precondition: `out` is the broadcast of `inputs` (see ``Broadcast/shape(_:)``).
    public init(out: [Int], inputs: [[Int]]) {
        outShape = out
        let full = inputs.map { Broadcast.strides(of: $0, in: out) }
        var dims: [Int] = []
        var strides = [[Int]](repeating: [], count: inputs.count)
        var prevBroadcast: [Bool]? = nil
        for d in 0..<out.count where out[d] != 1 {
            let bc = full.map { $0[d] == 0 }
            if let p = prevBroadcast, p == bc {
                dims[dims.count - 1] *= out[d]
                for k in 0..<inputs.count { strides[k][strides[k].count - 1] = full[k][d] }
            } else {
                dims.append(out[d])
                for k in 0..<inputs.count { strides[k].append(full[k][d]) }
            }
            prevBroadcast = bc
        }
        if dims.isEmpty {
            dims = [1]
            strides = strides.map { _ in [0] }
        }
        self.dims = dims
        self.strides = strides
    }

    /// Calls `body(outOffset, aOffset, bOffset)` at the start of every innermost run.
    @inlinable @inline(__always)
    public func forEachRun2(_ body: (Int, Int, Int) -> Void) {
        let r = dims.count - 1
        if r == 0 { body(0, 0, 0); return }
        let inner = dims[r]
        if r == 1 {
            // One outer dimension (the common case after merging): no cursor to allocate.
            let sa = strides[0][0], sb = strides[1][0]
            for run in 0..<dims[0] { body(run * inner, run * sa, run * sb) }
            return
        }
        var cursor = StridedCursor(shape: Array(dims.dropLast()), a: Array(strides[0].dropLast()), b: Array(strides[1].dropLast()))
        for run in 0..<dims.dropLast().reduce(1, *) {
            body(run * inner, cursor.offsetA, cursor.offsetB)
            cursor.step()
        }
    }

    /// Calls `body(outOffset, aOffset, bOffset, cOffset)` at the start of every innermost run.
    @inlinable @inline(__always)
    public func forEachRun3(_ body: (Int, Int, Int, Int) -> Void) {
        let r = dims.count - 1
        if r == 0 { body(0, 0, 0, 0); return }
        let inner = dims[r]
        if r == 1 {
            let sa = strides[0][0], sb = strides[1][0], sc = strides[2][0]
            for run in 0..<dims[0] { body(run * inner, run * sa, run * sb, run * sc) }
            return
        }
        var cursor = StridedCursor(shape: Array(dims.dropLast()), a: Array(strides[0].dropLast()), b: Array(strides[1].dropLast()),
                                   c: Array(strides[2].dropLast()))
        for run in 0..<dims.dropLast().reduce(1, *) {
            body(run * inner, cursor.offsetA, cursor.offsetB, cursor.offsetC)
            cursor.step()
        }
    }
}
