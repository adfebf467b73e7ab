import GraphIR

/// Read-only int8 storage: either owned, or a view into a memory-mapped weight file (no copy;
/// the ``WeightFile`` is kept alive by the buffer).
public final class Int8Buffer {
    public let count: Int
    let base: UnsafePointer<Int8>
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
    }

    /// A view of `count` bytes at `pointer`, valid while `owner` lives.
    public init(mapped pointer: UnsafeRawPointer, count: Int, owner: AnyObject) {
        self.count = count
        base = pointer.assumingMemoryBound(to: Int8.self)
        self.owner = owner
        owned = nil
    }

    deinit { owned?.deallocate() }

    /// Whether the bytes are a view of a mapped file (not a copy).
    public var isMapped: Bool { owned == nil }

    public subscript(i: Int) -> Int8 { base[i] }

    public func withUnsafeBufferPointer<R>(_ body: (UnsafeBufferPointer<Int8>) throws -> R) rethrows -> R {
        try body(UnsafeBufferPointer(start: base, count: count))
    }

    public func map<T>(_ f: (Int8) -> T) -> [T] { (0..<count).map { f(base[$0]) } }
}
