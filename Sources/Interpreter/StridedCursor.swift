/// The one index stepper of the interpreter: walks a multi-index through `shape` in row-major
/// order (last axis fastest) and keeps up to three linear offsets, `offsetA = Σ index[d] ·
/// stridesA[d]` (likewise B and C), updated incrementally: each step adds one stride and, when
/// an axis wraps, takes back that axis's whole extent. Used by the strided copies, the
/// broadcasting loops, permutations and the state-region offsets.
///
/// Strides are in elements and may be 0 (broadcast) or negative. A cursor over an empty shape
/// (rank 0) never moves.
@frozen
public struct StridedCursor {
    @usableFromInline let shape: [Int]
    @usableFromInline let stridesA: [Int], stridesB: [Int], stridesC: [Int]
    @usableFromInline var index: [Int]
    public var offsetA: Int, offsetB: Int, offsetC: Int

    /// - Parameters: `shape`: the axes walked; `a`/`b`/`c`: one stride per axis (omitted:
    ///   the offset stays at its start); `start`: the offsets at index 0.
    @inlinable
    public init(shape: [Int], a: [Int], b: [Int]? = nil, c: [Int]? = nil, start: (Int, Int, Int) = (0, 0, 0)) {
        precondition(a.count == shape.count && (b?.count ?? shape.count) == shape.count && (c?.count ?? shape.count) == shape.count,
                     "StridedCursor: one stride per axis")
        self.shape = shape
        stridesA = a
        stridesB = b ?? [Int](repeating: 0, count: shape.count)
        stridesC = c ?? [Int](repeating: 0, count: shape.count)
        index = [Int](repeating: 0, count: shape.count)
        (offsetA, offsetB, offsetC) = start
    }

    /// Moves to the next index in row-major order; after the last one it wraps to index 0.
    @inlinable @inline(__always)
    public mutating func step() {
        var d = shape.count - 1
        while d >= 0 {
            index[d] += 1
            offsetA += stridesA[d]
            offsetB += stridesB[d]
            offsetC += stridesC[d]
            if index[d] < shape[d] { return }
            offsetA -= stridesA[d] * shape[d]
            offsetB -= stridesB[d] * shape[d]
            offsetC -= stridesC[d] * shape[d]
            index[d] = 0
            d -= 1
        }
    }
}
