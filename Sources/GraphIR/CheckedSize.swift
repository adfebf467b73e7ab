/// Checked element counts and byte sizes: the one place where a shape's product and a
/// tensor's byte size are computed for sizes that come from a file (model types, description
/// shapes, `.npy` headers, reshape / tile / fill targets, interpreter allocations).
///
/// A count that overflows `Int`, or a byte size above ``maxBytes`` (2^48, far beyond any
/// memory), is `nil` from the optional forms and a ``SizeError`` from the throwing ones, so a
/// hostile shape (`[2^32, 2^32]`, rank 64 of 2s) is refused where it is read instead of
/// trapping later in the printer, constant conversion or a kernel.
public enum CheckedSize {
    /// Largest byte size considered representable (256 TiB).
    public static let maxBytes = 1 << 48

    /// The product of `shape`, or nil when a dimension is negative or the product overflows
    /// or exceeds ``maxBytes`` elements.
    /// (Inlinable: kernels call it on every op, and the unspecialized generic walked `[Int]`
    /// through protocol witnesses, ~2,000 instructions per call.)
    @inlinable
    public static func elementCount<S: Sequence>(_ shape: S) -> Int? where S.Element == Int {
        var n = 1
        for d in shape {
            guard d >= 0 else { return nil }
            let (m, o) = n.multipliedReportingOverflow(by: d)
            guard !o, m <= maxBytes else { return nil }
            n = m
        }
        return n
    }

    /// Bytes for `count` elements of `dtype` (sub-byte dtypes bit-packed; string counted as
    /// one 8-byte reference per element), or nil on overflow.
    public static func byteCount(elements count: Int, dtype: DType) -> Int? {
        guard count >= 0 else { return nil }
        let bits = dtype.bitWidth == 0 ? 64 : dtype.bitWidth
        let (b, o) = count.multipliedReportingOverflow(by: bits)
        guard !o else { return nil }
        let bytes = (b + 7) / 8
        return bytes <= maxBytes ? bytes : nil
    }

    /// Bytes for a tensor of `shape` and `dtype`, or nil on overflow.
    public static func byteCount(shape: [Int], dtype: DType) -> Int? {
        elementCount(shape).flatMap { byteCount(elements: $0, dtype: dtype) }
    }

    /// Bytes for `count` elements of `stride` bytes each (the interpreter's storage width).
    public static func bytes(elements count: Int, stride: Int) -> Int? {
        guard count >= 0, stride >= 0 else { return nil }
        let (b, o) = count.multipliedReportingOverflow(by: stride)
        return !o && b <= maxBytes ? b : nil
    }

    /// - Throws: ``SizeError`` naming `what` when the product overflows.
    public static func requireElementCount(_ shape: [Int], _ what: @autoclosure () -> String) throws -> Int {
        guard let n = elementCount(shape) else {
            throw SizeError(what: what(), reason: "shape \(shape) has an element count that overflows (limit \(maxBytes) elements)")
        }
        return n
    }

    /// - Throws: ``SizeError`` naming `what` when the byte size overflows.
    public static func requireByteCount(shape: [Int], dtype: DType, _ what: @autoclosure () -> String) throws -> Int {
        guard let b = byteCount(shape: shape, dtype: dtype) else {
            throw SizeError(what: what(), reason: "\(dtype.rawValue) shape \(shape) has a byte size that overflows (limit \(maxBytes) bytes)")
        }
        return b
    }
}

/// An element count or byte size that overflows, or an allocation over the memory budget.
public struct SizeError: Error, Equatable, CustomStringConvertible {
    /// The file, op or value whose size is at fault.
    public var what: String
    public var reason: String
    public init(what: String, reason: String) { self.what = what; self.reason = reason }
    public var description: String { "\(what): \(reason)" }
}
