import GraphIR

/// Read-only int8 storage: either owned, or a view into a memory-mapped weight file (no copy;
/// the ``WeightFile`` is kept alive by the buffer). The values are one a byte, or — for an
/// int4 blob kept as stored (``isPackedInt4``) — two a byte in MIL's sub-byte packing: value i
/// in the low nibble of byte i / 2 when i is even, the high nibble when odd, two's complement.
public final class Int8Buffer {
    /// Number of values.
    public let count: Int
    let base: UnsafePointer<Int8>
    /// Whether the values are int4, two a byte (``bytes`` = ⌈count / 2⌉).
    public let isPackedInt4: Bool
    private let owner: AnyObject?
    private let owned: UnsafeMutablePointer<Int8>?

    /// Copies `array`.
    public init(_ array: [Int8]) {
        let p = UnsafeMutablePointer<Int8>.allocate(capacity: max(array.count, 1))
        array.withUnsafeBufferPointer { if let b = $0.baseAddress { p.initialize(from: b, count: array.count) } }
        count = array.count
        base = UnsafePointer(p)
        owned = p
        owner = nil
        isPackedInt4 = false
    }

    /// A view of `count` values at `pointer`, valid while `owner` lives: `count` bytes, or
    /// ⌈count / 2⌉ bytes of packed int4 values when `packedInt4`.
    public init(mapped pointer: UnsafeRawPointer, count: Int, owner: AnyObject, packedInt4: Bool = false) {
        self.count = count
        base = pointer.assumingMemoryBound(to: Int8.self)
        self.owner = owner
        owned = nil
        isPackedInt4 = packedInt4
    }

    deinit { owned?.deallocate() }

    /// Whether the bytes are a view of a mapped file (not a copy).
    public var isMapped: Bool { owned == nil }

    /// Bytes of storage.
    public var bytes: Int { isPackedInt4 ? (count + 1) / 2 : count }

    /// Value `i` (an int4 value sign-extended).
    public subscript(i: Int) -> Int8 {
        guard isPackedInt4 else { return base[i] }
        let byte = UInt8(bitPattern: base[i >> 1])
        let nibble = i & 1 == 0 ? byte & 0x0F : byte >> 4
        return Int8(bitPattern: nibble << 4) >> 4
    }

    /// The storage bytes (``bytes`` of them: packed nibbles when ``isPackedInt4``).
    public func withUnsafeBufferPointer<R>(_ body: (UnsafeBufferPointer<Int8>) throws -> R) rethrows -> R {
        try body(UnsafeBufferPointer(start: base, count: bytes))
    }

    public func map<T>(_ f: (Int8) -> T) -> [T] { (0..<count).map { f(self[$0]) } }

    /// One byte a value (a copy when packed, else self).
    public func unpacked() -> Int8Buffer { isPackedInt4 ? Int8Buffer(map { $0 }) : self }
}
