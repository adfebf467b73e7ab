import GraphIR

/// Read-only fp16 storage (IEEE binary16 bit patterns): a view into a memory-mapped weight
/// file (no copy; the ``WeightFile`` is kept alive by the buffer). Used for the per-block
/// scales of compressed weights, which the int8 kernels read as fp16 directly — the model's
/// own bytes, instead of a widened fp32 copy twice their size.
public final class HalfBuffer {
    public let count: Int
    let base: UnsafePointer<UInt16>
    private let owner: AnyObject?
    private let owned: UnsafeMutablePointer<UInt16>?

    /// A view of `count` fp16 values at `pointer` (2-byte aligned), valid while `owner` lives.
    public init(mapped pointer: UnsafeRawPointer, count: Int, owner: AnyObject) {
        self.count = count
        base = pointer.assumingMemoryBound(to: UInt16.self)
        self.owner = owner
        owned = nil
    }

    /// Rounds `values` to fp16 and owns them.
    public init(rounding values: [Float]) {
        let p = UnsafeMutablePointer<UInt16>.allocate(capacity: max(values.count, 1))
        for (i, v) in values.enumerated() { p[i] = Half.fromFloat(v) }
        count = values.count
        base = UnsafePointer(p)
        owner = nil
        owned = p
    }

    deinit { owned?.deallocate() }

    /// Element `i` widened to Float.
    @inline(__always)
    public subscript(i: Int) -> Float { Half.toFloat(base[i]) }

    /// Every element widened to Float.
    public var floats: [Float] { (0..<count).map { Half.toFloat(base[$0]) } }

    public func withUnsafeBufferPointer<R>(_ body: (UnsafeBufferPointer<UInt16>) throws -> R) rethrows -> R {
        try body(UnsafeBufferPointer(start: base, count: count))
    }
}
