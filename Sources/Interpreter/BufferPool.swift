#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Recycled tensor storage for one ``ExecutionPlan``: the element arrays of values released
/// after their last use are kept, by element type (`Float`, `Int32`, `Bool`) and element count,
/// and handed to the next kernel that asks for an output of that type and count. In a steady
/// state (the same function called again with the same shapes, e.g. one decode step after
/// another) every kernel output then reuses a buffer: no tensor storage is allocated per op.
///
/// Kernels get their output arrays through ``BufferPool/uninitialized(_:)`` and
/// ``BufferPool/zeros(_:)``, which take from the pool installed on the running thread by the
/// plan (or allocate when there is none or it has nothing of that size). A recycled array may
/// still be shared with a live value (a `reshape` output shares its input's storage): writing
/// into it then copies (copy-on-write), so sharing costs an allocation, never correctness.
///
/// Memory: free buffers of sizes a run did not ask for are kept up to ``idleBudgetBytes`` (most
/// recently used first; none by default) and dropped beyond it at the end of the run
/// (``endRun()``), which then hands the freed pages back to the OS. So the first decode step
/// after a prefill frees the prefill's wide buffers: decode runs in its own working set, and the
/// next prefill allocates afresh (a few MiB of `malloc` per prompt, well under 1 % of its time).
public final class BufferPool {
    /// Buffer traffic since the pool was made (or ``resetStats()``).
    public struct Stats: Equatable {
        /// Outputs served from a recycled buffer.
        public var hits = 0
        /// Outputs that needed a new allocation (nothing of that type and size was free).
        public var misses = 0
        /// ``misses`` by the op type whose kernel asked.
        public var missesByOp: [String: Int] = [:]
        /// Released buffers the pool did not hand out: kernel outputs allocated outside it.
        public var foreign = 0
        /// ``foreign`` by the op type that produced the buffer.
        public var foreignByOp: [String: Int] = [:]
    }

    /// (The hot `var`s of the pool skip the dynamic exclusivity check: the plans run lock
    /// already serializes every access, and each check cost ~100 instructions per kernel output.)
    @exclusivity(unchecked) public private(set) var stats = Stats()
    /// Counts ``Stats/foreign`` and names ops in ``Stats/missesByOp`` / ``Stats/foreignByOp``
    /// (tests and diagnosis; a few hash lookups per op, off by default).
    @exclusivity(unchecked) public var tracking = false

    /// Free buffers of one element type and count (a size class).
    private struct SizeClass {
        let tag: Int
        let count: Int
        var floats: [[Float]] = []
        var ints: [[Int32]] = []
        var bools: [[Bool]] = []
        /// ``runIndex`` of the last run that asked for this size (0: never).
        var lastUsed = 0
        /// ``runIndex`` when last asked for (the current run's index: asked this run).
        var askedIn = -1
        var free: Int { floats.count + ints.count + bools.count }
        var bytes: Int { free * count * (tag == 2 ? 1 : 4) }
    }
    /// Size classes, found by key `count * 4 + tag` through ``classIndex`` (no hashing of a
    /// `Dictionary` per kernel output and per release).
    @exclusivity(unchecked) private var classes: [SizeClass] = []
    private let classIndex = WordTable()
    /// Base addresses of arrays this pool made or recycled (to tell foreign buffers apart).
    @exclusivity(unchecked) private var known = Set<UnsafeRawPointer>()
    /// Type of the op whose kernel is running (set by the plan; for ``Stats/missesByOp``).
    @exclusivity(unchecked) var currentOp = ""
    /// Slots currently holding each buffer (by base address).
    private let live = WordTable(capacity: 1024)
    private let pinned = WordTable(capacity: 1024)
    private let pinnedForRun = WordTable()
    /// Op type that produced each buffer not made by the pool (for ``Stats/foreignByOp``).
    @exclusivity(unchecked) private var origin: [UnsafeRawPointer: String] = [:]
    /// Free buffers kept per size; more are dropped.
    private let perSizeLimit = 16
    /// Bytes of free buffers of sizes the last run did not use that are kept (0: none).
    public var idleBudgetBytes = 0
    /// Dropping at least this many bytes in one ``endRun()`` returns free heap pages to the OS
    /// (`malloc_trim`): buffers under glibc's mmap threshold otherwise stay resident as free heap.
    static let trimThresholdBytes = 1 << 20
    @exclusivity(unchecked) private var runIndex = 0

    public init() {}

    public func resetStats() { stats = Stats() }

    // MARK: - thread's current pool

    private static let key: pthread_key_t = {
        var k = pthread_key_t()
        pthread_key_create(&k, nil)
        return k
    }()

    /// The pool of the plan running on this thread, if any.
    public static var current: BufferPool? {
        guard let p = pthread_getspecific(key) else { return nil }
        return Unmanaged<BufferPool>.fromOpaque(p).takeUnretainedValue()
    }

    /// Runs `body` with `self` as this thread's current pool (restoring the previous one).
    func installed<R>(_ body: () throws -> R) rethrows -> R {
        let previous = pthread_getspecific(BufferPool.key)
        pthread_setspecific(BufferPool.key, Unmanaged.passUnretained(self).toOpaque())
        defer { pthread_setspecific(BufferPool.key, previous) }
        return try body()
    }

    // MARK: - kernel API

    /// An array of `count` elements whose contents are unspecified (recycled values or
    /// uninitialised memory): the caller must write every element. `R` must be a trivial type
    /// (`Float`, `Int32`, `Bool`, …; checked): use ``build(_:_:)`` for any type.
    @inline(__always)
    public static func uninitialized<R>(_ count: Int) -> [R] {
        if count > 0, let pool = current, let a: [R] = pool.take(count) { return a }
        return fresh(count)
    }

    /// An array of `count` elements, every one of which `body` initialises through the pointer
    /// it gets (as `Array(unsafeUninitializedCapacity:)`); trivial element types reuse a pooled
    /// buffer, others are allocated.
    @inline(__always)
    public static func build<R>(_ count: Int, _ body: (UnsafeMutablePointer<R>) throws -> Void) rethrows -> [R] {
        guard count > 0 else { return [] }
        if _isPOD(R.self) {
            var a: [R] = uninitialized(count)
            try a.withUnsafeMutableBufferPointer { try body($0.baseAddress!) }
            return a
        }
        return try [R](unsafeUninitializedCapacity: count) { buf, n in
            try body(buf.baseAddress!)
            n = count
        }
    }

    /// A zero-filled `[Float]` of `count` elements (recycled when possible).
    public static func zeros(_ count: Int) -> [Float] {
        var a: [Float] = uninitialized(count)
        a.withUnsafeMutableBufferPointer { p in
            if let b = p.baseAddress { b.update(repeating: 0, count: count) }
        }
        return a
    }

    /// A zero-filled `[Int32]` of `count` elements (recycled when possible).
    public static func zeroInts(_ count: Int) -> [Int32] {
        var a: [Int32] = uninitialized(count)
        a.withUnsafeMutableBufferPointer { p in
            if let b = p.baseAddress { b.update(repeating: 0, count: count) }
        }
        return a
    }

    @inline(__always)
    static func fresh<R>(_ count: Int) -> [R] {
        precondition(_isPOD(R.self), "BufferPool: \(R.self) is not a trivial type")
        let a = [R](unsafeUninitializedCapacity: count) { _, n in n = count }
        if count > 0, let pool = current { pool.record(a, miss: true) }
        return a
    }

    private static func tag<R>(_: R.Type) -> Int? {
        if R.self == Float.self { return 0 }
        if R.self == Int32.self { return 1 }
        if R.self == Bool.self { return 2 }
        return nil
    }

    private func take<R>(_ count: Int) -> [R]? {
        guard let t = BufferPool.tag(R.self) else { return nil }
        let c = sizeClass(count, t)
        classes[c].askedIn = runIndex
        switch t {
        case 0: return claim(&classes[c].floats).map { unsafeBitCast($0, to: [R].self) }
        case 1: return claim(&classes[c].ints).map { unsafeBitCast($0, to: [R].self) }
        default: return claim(&classes[c].bools).map { unsafeBitCast($0, to: [R].self) }
        }
    }

    /// The index of the size class of `count` elements of type `tag` (made when new).
    @inline(__always)
    private func sizeClass(_ count: Int, _ tag: Int) -> Int {
        let key = UInt(bitPattern: count &* 4 &+ tag)
        if let c = classIndex.value(key) { return c }
        classes.append(SizeClass(tag: tag, count: count))
        classIndex.set(key, classes.count - 1)
        return classes.count - 1
    }

    /// Pops a free array and makes it unique before a kernel writes into it: if a live value
    /// still shares its storage, copy-on-write allocates here, and that counts as a miss. (The
    /// array is moved out of the list, never copied, so a buffer no one else holds is not
    /// duplicated.)
    private func claim<T>(_ list: inout [[T]]) -> [T]? {
        guard !list.isEmpty else { return nil }
        var a = list.removeLast()
        let before = a.withUnsafeBufferPointer { $0.baseAddress.map(UnsafeRawPointer.init) }
        let after = a.withUnsafeMutableBufferPointer { $0.baseAddress.map(UnsafeRawPointer.init) }
        if before == after {
            stats.hits += 1
        } else {
            record(a, miss: true)
        }
        return a
    }

    private func record<R>(_ a: [R], miss: Bool) {
        if miss {
            stats.misses += 1
            if tracking { stats.missesByOp[currentOp, default: 0] += 1 }
        }
        if tracking { a.withUnsafeBufferPointer { p in if let b = p.baseAddress { known.insert(UnsafeRawPointer(b)) } } }
    }

    // MARK: - plan API

    /// Notes a value stored in a slot: counts the slots sharing its storage (a view such as a
    /// `reshape` output shares its input's), and (when tracking) remembers the op that produced
    /// storage the pool did not make, so it can be named when released.
    @inline(__always)
    func noteProduced(_ v: RuntimeValue, by op: @autoclosure () -> String) {
        guard case let .tensor(t) = v, let base = BufferPool.base(t.data) else { return }
        live.add(BufferPool.word(base), 1)
        if tracking, !known.contains(base), origin[base] == nil { origin[base] = op() }
    }

    /// Storage the pool must never hand out: constants (for the plan's life) and the caller's
    /// inputs (for one run).
    func pin(_ v: RuntimeValue, forRun: Bool) {
        guard case let .tensor(t) = v, let base = BufferPool.base(t.data) else { return }
        (forRun ? pinnedForRun : pinned).set(BufferPool.word(base), 1)
    }

    /// Packed panels of this plan's constant fp32 `linear` weights (``PackedWeights``).
    let packedWeights = PackedWeights()

    /// The packed panels of `w` (`n × k`) when `w` is the storage of one of the plan's
    /// constants (pinned for the plan's life), packed on first use; nil for any other storage
    /// (a computed weight would be packed again on every call) or without a packed route.
    func packedConstant(_ w: [Float], n: Int, k: Int) -> PackedWeights.Panels? {
        guard let b = BufferPool.base(.float(w)), pinned.contains(BufferPool.word(b)) else { return nil }
        return packedWeights.panels(for: w, n: n, k: k)
    }

    @inline(__always)
    static func word(_ p: UnsafeRawPointer) -> UInt { UInt(bitPattern: Int(bitPattern: p)) }

    @inline(__always)
    static func base(_ d: TensorData) -> UnsafeRawPointer? {
        @inline(__always) func b<T>(_ a: [T]) -> UnsafeRawPointer? { a.withUnsafeBufferPointer { $0.baseAddress.map(UnsafeRawPointer.init) } }
        switch d {
        case let .float(a): return b(a)
        case let .int(a): return b(a)
        case let .bool(a): return b(a)
        case .string: return nil
        }
    }

    /// A slot holding `v` is released: its storage returns to the pool once no other slot
    /// shares it (and it is not pinned).
    func release(_ v: RuntimeValue) {
        switch v {
        case let .tensor(t):
            guard let base = BufferPool.base(t.data) else { return }
            let w = BufferPool.word(base)
            if let n = live.value(w) {
                if n > 1 { live.set(w, n - 1); return }
                live.remove(w)
            }
            recycle(t.data)
        case let .list(vs), let .tuple(vs): for x in vs { release(x) }
        default: break
        }
    }

    /// Takes back the storage of a released value (tensors only; lists and tuples recurse).
    func recycle(_ v: RuntimeValue) {
        switch v {
        case let .tensor(t): recycle(t.data)
        case let .list(vs), let .tuple(vs): for x in vs { recycle(x) }
        default: break
        }
    }

    /// Takes back a tensor's storage (ignored for pinned storage).
    func recycle(_ d: TensorData) {
        if let base = BufferPool.base(d) {
            let w = BufferPool.word(base)
            if pinned.contains(w) || pinnedForRun.contains(w) { return }
        }
        switch d {
        case let .float(a):
            guard let c = admit(a, tag: 0) else { return }
            BufferPool.put(a, into: &classes[c].floats)
        case let .int(a):
            guard let c = admit(a, tag: 1) else { return }
            BufferPool.put(a, into: &classes[c].ints)
        case let .bool(a):
            guard let c = admit(a, tag: 2) else { return }
            BufferPool.put(a, into: &classes[c].bools)
        case .string: break
        }
    }

    /// The size class a released array goes to, or nil when it is empty or its class is full;
    /// counts foreign buffers when tracking.
    private func admit<T>(_ a: [T], tag: Int) -> Int? {
        let n = a.count
        guard n > 0 else { return nil }
        if tracking {
            let base = a.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress!) }
            if !known.contains(base) {
                stats.foreign += 1
                stats.foreignByOp[origin[base] ?? "?", default: 0] += 1
                known.insert(base)
            }
        }
        let c = sizeClass(n, tag)
        guard classes[c].free < perSizeLimit else { return nil }
        return c
    }

    /// Appends `a` to `list` unless the same storage is there already (a value and a view
    /// sharing it, released twice: kept once).
    private static func put<T>(_ a: [T], into list: inout [[T]]) {
        let base = a.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress!) }
        if list.contains(where: { $0.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress!) } == base }) { return }
        list.append(a)
    }

    /// Ends a run: free buffers of sizes not asked for during it are kept only up to
    /// ``idleBudgetBytes`` (the most recently used sizes first); when that drops at least
    /// ``trimThresholdBytes``, the freed heap pages go back to the OS (``Memory/releaseFreeMemory()``).
    func endRun() {
        let run = runIndex
        runIndex += 1
        // Idle sizes holding buffers, most recently used first.
        var idle: [(c: Int, bytes: Int, last: Int)] = []
        for c in classes.indices {
            if classes[c].askedIn == run {
                classes[c].lastUsed = runIndex
            } else if classes[c].free > 0 {
                idle.append((c, classes[c].bytes, classes[c].lastUsed))
            }
        }
        idle.sort { $0.last > $1.last }
        var kept = 0, dropped = 0
        for e in idle {
            kept += e.bytes
            guard kept > idleBudgetBytes else { continue }
            dropped += e.bytes
            classes[e.c].floats = []
            classes[e.c].ints = []
            classes[e.c].bools = []
            classes[e.c].lastUsed = 0
        }
        // Sizes of a long-gone shape (e.g. many prompt widths): forget the empty idle classes
        // once there are many.
        if classes.count > 1024 {
            classes.removeAll { $0.free == 0 && $0.askedIn != run }
            classIndex.removeAll()
            for (i, c) in classes.enumerated() { classIndex.set(UInt(bitPattern: c.count &* 4 &+ c.tag), i) }
        }
        if dropped >= BufferPool.trimThresholdBytes { Memory.releaseFreeMemory() }
        origin.removeAll(keepingCapacity: true)
        live.removeAll()
        pinnedForRun.removeAll()
        if tracking {
            var free = Set<UnsafeRawPointer>()
            func mark<T>(_ lists: [[T]]) {
                for a in lists { free.insert(a.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress!) }) }
            }
            for c in classes { mark(c.floats); mark(c.ints); mark(c.bools) }
            // Addresses of buffers handed out and never returned (outputs kept by the caller) stay
            // known; forget them now and then so freed memory is not mistaken for a pool buffer.
            if known.count > 4 * max(free.count, 64) { known = free }
        }
    }

    /// Bytes held by free buffers.
    public var freeBytes: Int { classes.reduce(0) { $0 + $1.bytes } }
}
