import CKernels
import GraphIR
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A state buffer: one `state<tensor<…>>` that lives across calls (a KV cache).
///
/// Storage by dtype:
/// - `fp16`: binary16 bits (`UInt16`, 2 bytes an element); writes round to nearest even.
/// - `fp32`: `Float` (4 bytes an element).
/// - any other dtype: a runtime ``Tensor`` (floats as `Float` rounded to the dtype, integers
///   as `Int32`, bools as `Bool`).
///
/// Memory: fp16 and fp32 storage is an anonymous mapping obtained zero-filled from the OS, so
/// the pages of slots never written are not resident (a 2048-slot cache filled to 256 slots
/// costs an eighth of its size). ``reset()`` hands the pages back (no page is touched).
/// Reading the whole state as a tensor (``tensor()``) widens a copy; the fused KV write and
/// the fused attention work on the storage in place.
public final class StateBuffer {
    public let name: String
    public let type: TensorType
    /// Static shape of the state.
    public let shape: [Int]
    /// Elements: the product of `shape`.
    public let count: Int
    public var dtype: DType { type.dtype }

    /// Where the values are.
    enum Storage {
        /// fp16 as binary16 bits, `count` of them.
        case half(UnsafeMutablePointer<UInt16>)
        /// fp32, `count` floats.
        case float(UnsafeMutablePointer<Float>)
        /// Every other dtype (and empty states).
        case tensor(Tensor)
    }

    private(set) var storage: Storage
    /// The anonymous mapping behind `.half` / `.float` (nil for `.tensor`).
    private let region: UnsafeMutableRawPointer?
    private let regionBytes: Int
    /// The buffer a view (``init(view:offset:shape:)``) reads and writes (kept alive by it).
    private let parent: StateBuffer?

    /// A zeroed state, as Core ML initialises states.
    /// - Throws: `InterpreterError.badState` when the shape is not static, its element count
    ///   overflows, or the memory cannot be mapped.
    public init(name: String, type: TensorType) throws {
        guard let shape = type.fixedShape else {
            throw InterpreterError.badState(function: "", name: name, reason: "state shape \(type) is not static")
        }
        guard let n = type.elementCount else {
            throw InterpreterError.badState(function: "", name: name, reason: "state \(type) has too many elements")
        }
        do { try MemoryBudget.check(bytes: CheckedSize.byteCount(elements: n, dtype: type.dtype), "state \(type)") } catch let e as SizeError {
            throw InterpreterError.badState(function: "", name: name, reason: e.reason + " for \(type)")
        }
        self.name = name
        self.type = type
        self.shape = shape
        count = n
        parent = nil
        let elementBytes = type.dtype == .fp16 ? 2 : type.dtype == .fp32 ? 4 : 0
        guard elementBytes > 0, n > 0 else {
            region = nil
            regionBytes = 0
            storage = .tensor(Tensor.zeros(type.dtype, shape: shape))
            return
        }
        let (bytes, overflow) = n.multipliedReportingOverflow(by: elementBytes)
        guard !overflow, let p = StateBuffer.mapZeroed(bytes) else {
            throw InterpreterError.badState(function: "", name: name, reason: "cannot allocate \(n) × \(elementBytes) bytes for \(type)")
        }
        region = p
        regionBytes = bytes
        storage = elementBytes == 2 ? .half(p.bindMemory(to: UInt16.self, capacity: n))
                                    : .float(p.bindMemory(to: Float.self, capacity: n))
    }

    /// A view of `parent`'s mapped storage: the elements `offset ..< offset + count(shape)`,
    /// read and written in place (no copy) as a buffer of `shape` (e.g. layer l of a stacked
    /// `[L, 1, KV, CTX, D]` cache as `[1, KV, CTX, D]`). The view keeps `parent` alive.
    /// - Throws: `KernelError` when `parent` is not mapped (``isMapped``) or the range is
    ///   outside it.
    init(view parent: StateBuffer, offset: Int, shape: [Int]) throws {
        guard let n = CheckedSize.elementCount(shape), offset >= 0, n <= parent.count, offset <= parent.count - n else {
            throw KernelError("view of \(shape) at \(offset) outside state '\(parent.name)' \(parent.shape)")
        }
        switch parent.storage {
        case let .half(p): storage = .half(p + offset)
        case let .float(p): storage = .float(p + offset)
        case .tensor: throw KernelError("state '\(parent.name)' of \(parent.dtype.rawValue) has no view")
        }
        name = parent.name
        type = TensorType(parent.dtype, fixed: shape)
        self.shape = shape
        count = n
        region = nil
        regionBytes = 0
        self.parent = parent
    }

    deinit {
        if let region { munmap(region, regionBytes) }
    }

    /// Zeroes the state. Mapped storage is handed back to the OS (`MADV_DONTNEED` on Linux, a
    /// fresh mapping in place elsewhere): nothing is written, the pages stop being resident.
    public func reset() {
        if parent != nil {
            switch storage {
            case let .half(p): p.update(repeating: 0, count: count)
            case let .float(p): p.update(repeating: 0, count: count)
            case .tensor: break
            }
            return
        }
        guard let region else {
            storage = .tensor(Tensor.zeros(dtype, shape: shape))
            return
        }
        #if os(Linux)
        if madvise(region, regionBytes, MADV_DONTNEED) == 0 { return }
        #endif
        let p = mmap(region, regionBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON | MAP_FIXED, -1, 0)
        if p != region { memset(region, 0, regionBytes) }
    }

    /// The state's values as a tensor of the state's dtype and shape (fp16 widened to `Float`,
    /// exactly). Fills `count` elements (from the running plan's ``BufferPool`` when there is
    /// one) and reads every page of the storage.
    public func tensor() -> Tensor {
        switch storage {
        case let .half(p):
            return Tensor(.fp16, shape: shape, floats: BufferPool.build(count) { fk_half_to_float(p, $0, count) })
        case let .float(p):
            return Tensor(.fp32, shape: shape, floats: BufferPool.build(count) { $0.update(from: p, count: count) })
        case let .tensor(t):
            return t
        }
    }

    /// Replaces the contents, rounding to the state's dtype (fp16: round to nearest even, as
    /// `Rounding.toHalf`). Integer and bool tensors are converted to the state's
    /// kind of values.
    /// - Throws: `KernelError` when the shape differs, or for string data in a numeric state
    ///   (and numbers in a string state). The state is unchanged then.
    public func write(_ t: Tensor) throws {
        guard t.shape == shape else {
            throw KernelError("write of shape \(t.shape) into state '\(name)' of shape \(shape)")
        }
        if case .string = t.data, dtype != .string {
            throw KernelError("write of strings into state '\(name)' of \(dtype.rawValue)")
        }
        switch storage {
        case let .half(p):
            let a = t.floats
            a.withUnsafeBufferPointer { fk_float_to_half($0.baseAddress!, p, count) }
        case let .float(p):
            let a = t.floats
            a.withUnsafeBufferPointer { p.update(from: $0.baseAddress!, count: count) }
        case .tensor:
            var v = t
            v.dtype = dtype
            if dtype.isFloat {
                v.data = .float(t.floats)
            } else if dtype == .bool {
                v.data = .bool(t.bools)
            } else if dtype == .string {
                guard case .string = t.data else { throw KernelError("write of numbers into string state '\(name)'") }
            } else {
                v.data = .int(t.ints)
            }
            Rounding.toStorage(&v)
            storage = .tensor(v)
        }
    }

    /// Stores `n` floats from `src` at elements `offset ..< offset + n` of mapped (fp16 / fp32)
    /// storage, rounding to fp16 for an fp16 state. Only those elements, and so only their
    /// pages, are touched.
    /// - Throws: `KernelError` for a range outside the state, or a state kept as a tensor
    ///   (``isMapped`` false; callers take the dense path then).
    func store(_ src: UnsafePointer<Float>, count n: Int, at offset: Int) throws {
        guard offset >= 0, n >= 0, offset <= count - n else {
            throw KernelError("write of \(n) elements at \(offset) outside state '\(name)' of \(count) elements")
        }
        switch storage {
        case let .half(p): fk_float_to_half(src, p + offset, n)
        case let .float(p): (p + offset).update(from: src, count: n)
        case .tensor: throw KernelError("state '\(name)' of \(dtype.rawValue) is not written in place")
        }
    }

    /// Whether the values live in mapped fp16 / fp32 storage (``store(_:count:at:)`` works).
    var isMapped: Bool { region != nil || parent != nil }

    /// `bytes` of zeroed, not yet resident memory (nil on failure).
    private static func mapZeroed(_ bytes: Int) -> UnsafeMutableRawPointer? {
        guard let p = mmap(nil, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON, -1, 0),
              p != UnsafeMutableRawPointer(bitPattern: -1) else { return nil }
        #if os(Linux)
        // Huge pages would make one written slot fault in 2 MiB of zeros.
        _ = madvise(p, bytes, MADV_NOHUGEPAGE)
        #endif
        return p
    }
}
