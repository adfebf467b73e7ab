/// The strided copy engine of the shape kernels (`transpose`, `concat`, `split`, `tile`, `pad`,
/// slices, space/depth moves): an output is assembled from regions, each a strided view of a
/// source. Dimensions are merged where contiguous, and a transposing region runs as 32×32 tiles.
extension ShapeKernels {
    /// One strided copy: for every index `i` of `shape`, `out[dstOffset + i·dstStrides] =
    /// source[srcOffset + i·srcStrides]`. `source` indexes the sources given to ``assemble``;
    /// -1 copies within the output itself (the regions must not overlap).
    struct Region {
        var shape: [Int]
        var source: Int
        var srcOffset: Int
        var srcStrides: [Int]
        var dstOffset: Int
        var dstStrides: [Int]
    }

    /// Builds an output of `count` elements from `sources` (all of one storage kind) by running
    /// `regions` in order. With `fill == nil` the regions must write every element.
    static func assemble(_ sources: [TensorData], count: Int, fill: Float?, regions: [Region]) throws -> TensorData {
        guard let first = sources.first else { throw KernelError("no inputs") }
        try KernelError.checkAllocation(count == Int.max ? nil : count, shape: [count])
        func all<T>(_ pick: (TensorData) -> [T]?) throws -> [[T]] {
            try sources.map { d in
                guard let a = pick(d) else { throw KernelError("inputs have different dtypes (storage of one is \(d), expected the same as the first)") }
                return a
            }
        }
        let f = fill ?? 0
        switch first {
        case .float:
            return .float(build(try all { if case let .float(a) = $0 { return a } else { return nil } }, count: count, fill: f, covered: fill == nil, regions))
        case .int:
            return .int(build(try all { if case let .int(a) = $0 { return a } else { return nil } }, count: count,
                              fill: f.isFinite ? Int32(clamping: Int64(f)) : 0, covered: fill == nil, regions))
        case .bool:
            return .bool(build(try all { if case let .bool(a) = $0 { return a } else { return nil } }, count: count, fill: f != 0, covered: fill == nil, regions))
        case .string:
            return .string(build(try all { if case let .string(a) = $0 { return a } else { return nil } }, count: count, fill: "", covered: false, regions))
        }
    }

    static func build<T>(_ sources: [[T]], count: Int, fill: T, covered: Bool, _ regions: [Region]) -> [T] {
        guard count > 0 else { return [] }
        var out: [T]
        if covered && _isPOD(T.self) {
            // Every element is written by a region; skip the fill pass.
            out = BufferPool.uninitialized(count)
        } else if _isPOD(T.self) {
            out = BufferPool.uninitialized(count)
            out.withUnsafeMutableBufferPointer { $0.baseAddress!.update(repeating: fill, count: count) }
        } else {
            out = [T](repeating: fill, count: count)
        }
        out.withUnsafeMutableBufferPointer { o in
            let dst = o.baseAddress!
            for r in regions {
                if r.source < 0 {
                    copy(UnsafePointer(dst), dst, r)
                } else {
                    sources[r.source].withUnsafeBufferPointer { s in
                        if let base = s.baseAddress { copy(base, dst, r) }
                    }
                }
            }
        }
        return out
    }

    /// Runs one region. Dimensions of size 1 are dropped and dimensions contiguous in both
    /// source and destination are merged; the innermost run is then a block copy, or a tiled
    /// 2-D transpose when the source's unit-stride axis is not the destination's.
    static func copy<T>(_ src: UnsafePointer<T>, _ dst: UnsafeMutablePointer<T>, _ r: Region) {
        var shape: [Int] = [], ss: [Int] = [], ds: [Int] = []
        shape.reserveCapacity(r.shape.count)
        for i in 0..<r.shape.count {
            let n = r.shape[i]
            if n == 0 { return }
            if n == 1 { continue }
            let s = r.srcStrides[i], d = r.dstStrides[i]
            if let last = shape.last, ss[ss.count - 1] == s * n, ds[ds.count - 1] == d * n {
                shape[shape.count - 1] = last * n
                ss[ss.count - 1] = s
                ds[ds.count - 1] = d
            } else {
                shape.append(n); ss.append(s); ds.append(d)
            }
        }
        if shape.isEmpty {
            (dst + r.dstOffset).update(from: src + r.srcOffset, count: 1)
            return
        }
        let n = shape.count
        // Transposing copy: bring the source's unit-stride axis next to the destination's.
        var tiled = false
        if n >= 2, ds[n - 1] == 1, ss[n - 1] != 1, let p = (0..<(n - 1)).last(where: { ss[$0] == 1 }) {
            if p != n - 2 {
                shape.swapAt(p, n - 2); ss.swapAt(p, n - 2); ds.swapAt(p, n - 2)
            }
            tiled = true
        }
        let innerDims = tiled ? 2 : 1
        let outer = n - innerDims
        let outerCount = product(shape[0..<outer])
        let m = shape[n - 1], sm = ss[n - 1], dm = ds[n - 1]
        let ma = tiled ? shape[n - 2] : 1, sa = tiled ? ss[n - 2] : 0, da = tiled ? ds[n - 2] : 0
        var cursor = StridedCursor(shape: Array(shape[0..<outer]), a: Array(ss[0..<outer]), b: Array(ds[0..<outer]),
                                   start: (r.srcOffset, r.dstOffset, 0))
        let contiguous = sm == 1 && dm == 1
        for _ in 0..<outerCount {
            let s = src + cursor.offsetA, d = dst + cursor.offsetB
            if tiled {
                let tile = 32
                var a0 = 0
                while a0 < ma {
                    let a1 = min(a0 + tile, ma)
                    var b0 = 0
                    while b0 < m {
                        let b1 = min(b0 + tile, m)
                        for a in a0..<a1 {
                            let sRow = s + a * sa, dRow = d + a * da
                            for b in b0..<b1 { dRow[b] = sRow[b * sm] }
                        }
                        b0 = b1
                    }
                    a0 = a1
                }
            } else if contiguous {
                d.update(from: s, count: m)
            } else {
                for k in 0..<m { d[k * dm] = s[k * sm] }
            }
            cursor.step()
        }
    }

    /// `x` viewed through `shape` / `strides` from `offset`, copied into a new contiguous tensor
    /// — or, when the view reads every element of `x` in storage order (a `transpose` that only
    /// moves size-1 axes, e.g. `[1, 1, H, D]` → `[1, H, 1, D]` at S = 1; a whole-tensor slice),
    /// `x`'s storage under the new shape (shared, as `reshape` shares: a later write copies).
    static func view(_ x: Tensor, shape outShape: [Int], offset: Int, strides: [Int], resultShape: [Int]? = nil) throws -> Tensor {
        let count = product(outShape)
        if offset == 0, count == x.count, count > 0, strides.count == outShape.count {
            let cs = contiguousStrides(outShape)
            if outShape.indices.allSatisfy({ outShape[$0] == 1 || strides[$0] == cs[$0] }) {
                return tensor(like: x, shape: resultShape ?? outShape, data: x.data)
            }
        }
        let r = Region(shape: outShape, source: 0, srcOffset: offset, srcStrides: strides,
                       dstOffset: 0, dstStrides: contiguousStrides(outShape))
        let data = try assemble([x.data], count: count, fill: nil, regions: [r])
        return tensor(like: x, shape: resultShape ?? outShape, data: data)
    }
}
