import GraphIR

/// A data-movement chain (`expand_dims`, `squeeze`, `transpose`, `reshape`, `tile`,
/// `slice_by_index`) applied to a buffer, described without copying: each logical axis is a list
/// of (size, element stride) factors, outer to inner, over a base element offset. A `tile`
/// repeat is a factor of stride 0, so the grouped-query `expand_dims` → `tile` → `reshape`
/// (`repeat_kv`), `transpose` → `tile` → `reshape` → `transpose` (`repeat_interleave`) and a
/// slice of a stacked `[L, 1, KV, CTX, D]` cache all come out as strided views of the source —
/// what ``AttentionFusion`` reads in place. Semantics: the MIL op reference (coremltools), the
/// same resolvers as the kernels (``SliceRegion``, ``ShapeKernels/resolveReshape(from:to:)``).
struct LayoutView: Equatable {
    struct Factor: Equatable {
        var size: Int
        var stride: Int
    }

    var base: Int
    var axes: [[Factor]]

    /// A row-major view of a buffer of `shape`.
    init(shape: [Int]) {
        base = 0
        var s = 1
        var a = [[Factor]](repeating: [], count: shape.count)
        for i in shape.indices.reversed() {
            a[i] = [Factor(size: shape[i], stride: s)]
            s *= shape[i]
        }
        axes = a
    }

    var shape: [Int] { axes.map { $0.reduce(1) { $0 * $1.size } } }

    /// The factors of axis `i` that are not size 1.
    func factors(_ i: Int) -> [Factor] { axes[i].filter { $0.size != 1 } }

    /// The element offset of every index along axis `i` (its factors as a mixed radix).
    func offsets(_ i: Int) -> [Int] {
        var out = [0]
        for f in axes[i] {
            var next = [Int]()
            next.reserveCapacity(out.count * f.size)
            for o in out { for j in 0..<f.size { next.append(o + j * f.stride) } }
            out = next
        }
        return out
    }

    /// The view's elements in row-major order of ``shape``, read from `source` as floats.
    /// - Throws: ``Mismatch`` when an element lies outside the source.
    func gather(_ source: AttentionFusion.KV) throws -> [Float] {
        let per = axes.indices.map(offsets)
        let total = per.reduce(1) { $0 * $1.count }
        let count = source.shape.reduce(1, *)
        var out = [Float](repeating: 0, count: total)
        guard total > 0 else { return out }
        let lo = base + per.map { $0.min() ?? 0 }.reduce(0, +), hi = base + per.map { $0.max() ?? 0 }.reduce(0, +)
        guard lo >= 0, hi < count else { throw Mismatch(reason: "view outside its buffer") }
        try source.withStorage { raw, half in
            out.withUnsafeMutableBufferPointer { o in
                var idx = [Int](repeating: 0, count: per.count)
                for n in 0..<total {
                    var off = base
                    for a in per.indices { off += per[a][idx[a]] }
                    o[n] = half ? Half.toFloat(raw.load(fromByteOffset: off * 2, as: UInt16.self))
                                : raw.load(fromByteOffset: off * 4, as: Float.self)
                    var a = per.count - 1
                    while a >= 0 { idx[a] += 1; if idx[a] < per[a].count { break }; idx[a] = 0; a -= 1 }
                }
            }
        }
        return out
    }

    /// Why a step cannot be expressed as a view.
    struct Mismatch: Error { let reason: String }

    mutating func expandDims(_ raw: [Int]) throws {
        let rank = axes.count + raw.count
        let norm = raw.map { $0 < 0 ? $0 + rank : $0 }.sorted()
        guard Set(norm).count == norm.count, norm.allSatisfy({ $0 >= 0 && $0 < rank }) else {
            throw Mismatch(reason: "expand_dims axes \(raw) out of range")
        }
        for a in norm { axes.insert([Factor(size: 1, stride: 0)], at: a) }
    }

    mutating func squeeze(_ raw: [Int]?) throws {
        let sh = shape
        let drop: Set<Int>
        if let raw {
            drop = Set(raw.map { $0 < 0 ? $0 + sh.count : $0 })
            guard drop.allSatisfy({ $0 >= 0 && $0 < sh.count && sh[$0] == 1 }) else {
                throw Mismatch(reason: "squeeze axes \(raw) are not size-1 axes of \(sh)")
            }
        } else {
            drop = Set(sh.indices.filter { sh[$0] == 1 })
        }
        axes = axes.enumerated().filter { !drop.contains($0.offset) }.map(\.element)
    }

    /// `perm` may count from the end (coremltools writes perms such as `[0, 2, -1, -3]` for the
    /// key of a BERT-style attention): −k is axis rank − k, as the `transpose` kernel reads it.
    mutating func transpose(_ perm: [Int]) throws {
        let rank = axes.count
        let norm = perm.map { $0 < 0 ? $0 + rank : $0 }
        guard norm.count == rank, Set(norm) == Set(0..<rank) else {
            throw Mismatch(reason: "transpose perm \(perm) for rank \(rank)")
        }
        axes = norm.map { axes[$0] }
    }

    mutating func tile(_ reps: [Int]) throws {
        guard reps.count == axes.count, reps.allSatisfy({ $0 >= 1 }) else {
            throw Mismatch(reason: "tile reps \(reps) for rank \(axes.count)")
        }
        for (i, r) in reps.enumerated() where r > 1 { axes[i].insert(Factor(size: r, stride: 0), at: 0) }
    }

    mutating func reshape(_ target: [Int]) throws {
        let to: [Int]
        do { to = try ShapeKernels.resolveReshape(from: shape, to: target) } catch let e as KernelError {
            throw Mismatch(reason: e.reason)
        }
        var queue = axes.flatMap { $0 }.filter { $0.size != 1 }
        if to.contains(0) { guard queue.isEmpty || shape.contains(0) else { throw Mismatch(reason: "reshape to an empty shape") } }
        var out: [[Factor]] = []
        for n in to {
            var got: [Factor] = []
            var have = 1
            while have < n {
                guard !queue.isEmpty else { throw Mismatch(reason: "reshape \(shape) → \(to) regroups no factor") }
                let f = queue.removeFirst()
                if have * f.size <= n {
                    guard n % (have * f.size) == 0 else { throw Mismatch(reason: "reshape \(shape) → \(to) splits a strided axis unevenly") }
                    got.append(f)
                    have *= f.size
                } else {
                    let outer = n / have
                    guard n % have == 0, f.size % outer == 0 else {
                        throw Mismatch(reason: "reshape \(shape) → \(to) splits a strided axis unevenly")
                    }
                    let inner = f.size / outer
                    got.append(Factor(size: outer, stride: f.stride * inner))
                    queue.insert(Factor(size: inner, stride: f.stride), at: 0)
                    have = n
                }
            }
            out.append(got.isEmpty ? [Factor(size: 1, stride: 0)] : got)
        }
        guard queue.isEmpty else { throw Mismatch(reason: "reshape \(shape) → \(to) leaves factors") }
        axes = out
    }

    /// `slice_by_index` through the kernels' resolver: an axis cut (not taken whole) must be a
    /// single strided factor.
    mutating func slice(_ region: SliceRegion) throws {
        var out: [[Factor]] = []
        for (i, fs) in axes.enumerated() {
            let n = region.shape[i], b = region.starts[i], len = region.lengths[i], st = region.steps[i]
            let whole = b == 0 && st == 1 && len == n
            if whole && !region.squeeze[i] { out.append(fs); continue }
            let real = fs.filter { $0.size != 1 }
            guard real.count <= 1 else { throw Mismatch(reason: "slice of a repeated (tiled or merged) axis \(i)") }
            let stride = real.first?.stride ?? 0
            base += b * stride
            if !region.squeeze[i] { out.append([Factor(size: len, stride: stride * st)]) }
        }
        axes = out
    }
}

/// One data-movement step of a KV chain: the op and where its parameters are (the index of
/// each among the fused step's operands; the data input `x` is not listed).
struct LayoutStep {
    let op: String
    let params: [(name: String, index: Int)]

    static let ops: Set<String> = ["expand_dims", "squeeze", "transpose", "reshape", "tile", "slice_by_index"]

    /// Applies the step to `view` with its parameters' run-time values.
    func apply(to view: inout LayoutView, value: (String) throws -> Tensor?) throws {
        func ints(_ n: String) throws -> [Int]? { try value(n).map { $0.ints.map(Int.init) } }
        func bools(_ n: String) throws -> [Bool]? { try value(n).map { $0.bools } }
        switch op {
        case "expand_dims":
            guard let a = try ints("axes") else { throw LayoutView.Mismatch(reason: "expand_dims without axes") }
            try view.expandDims(a)
        case "squeeze": try view.squeeze(try ints("axes"))
        case "transpose":
            guard let p = try ints("perm") else { throw LayoutView.Mismatch(reason: "transpose without perm") }
            try view.transpose(p)
        case "reshape":
            guard let s = try ints("shape") else { throw LayoutView.Mismatch(reason: "reshape without shape") }
            try view.reshape(s)
        case "tile":
            guard let r = try ints("reps") else { throw LayoutView.Mismatch(reason: "tile without reps") }
            try view.tile(r)
        case "slice_by_index":
            guard let b = try ints("begin"), let e = try ints("end") else { throw LayoutView.Mismatch(reason: "slice without begin/end") }
            let region: SliceRegion
            do {
                region = try SliceRegion(shape: view.shape, begin: b, end: e, stride: try ints("stride"),
                                         beginMask: try bools("begin_mask"), endMask: try bools("end_mask"),
                                         squeezeMask: try bools("squeeze_mask"))
            } catch let err as KernelError { throw LayoutView.Mismatch(reason: err.reason) }
            try view.slice(region)
        default:
            throw LayoutView.Mismatch(reason: "\(op) is not a data-movement op")
        }
    }
}
