/// A map from a nonzero machine word (a buffer's base address, a size-class key) to an `Int`,
/// for the run loop's bookkeeping: open addressing with linear probing over a power-of-two
/// table, one multiply as the hash, deletion by backward shift (no tombstones), so a decode
/// step's thousands of insert/remove pairs keep the table short. A class holding raw storage:
/// the plan's hot paths reach it through a `let` without the exclusivity checks and the
/// `Hasher` (SipHash) of a `Dictionary`.
///
/// Keys must be nonzero (0 marks an empty cell); operations on key 0 are ignored (`value(0)`
/// is nil). Not thread-safe (the plan's run lock guards its pool).
final class WordTable {
    @exclusivity(unchecked) private var keys: UnsafeMutablePointer<UInt>
    @exclusivity(unchecked) private var values: UnsafeMutablePointer<Int>
    @exclusivity(unchecked) private var capacity: Int
    @exclusivity(unchecked) private var shift: UInt
    /// Entries held.
    @exclusivity(unchecked) private(set) var count = 0

    init(capacity: Int = 64) {
        var c = 16, bits: UInt = 4
        while c < capacity { c <<= 1; bits += 1 }
        self.capacity = c
        shift = 64 - bits
        keys = .allocate(capacity: c)
        keys.initialize(repeating: 0, count: c)
        values = .allocate(capacity: c)
        values.initialize(repeating: 0, count: c)
    }

    deinit {
        keys.deallocate()
        values.deallocate()
    }

    @inline(__always)
    private func home(_ k: UInt) -> Int { Int(truncatingIfNeeded: (k &* 0x9E37_79B9_7F4A_7C15) >> shift) }

    /// The cell holding `k`, or nil.
    @inline(__always)
    private func cell(_ k: UInt) -> Int? {
        guard k != 0 else { return nil }
        let mask = capacity &- 1
        var i = home(k)
        while true {
            let x = keys[i]
            if x == k { return i }
            if x == 0 { return nil }
            i = (i &+ 1) & mask
        }
    }

    /// The value of `k`, or nil.
    @inline(__always)
    func value(_ k: UInt) -> Int? { cell(k).map { values[$0] } }

    func contains(_ k: UInt) -> Bool { cell(k) != nil }

    /// Sets `k` to `v` (inserting it).
    func set(_ k: UInt, _ v: Int) {
        guard k != 0 else { return }
        if let i = cell(k) { values[i] = v; return }
        insertNew(k, v)
    }

    /// Adds `delta` to the value of `k` (inserting it at `delta`); returns the new value.
    @discardableResult
    func add(_ k: UInt, _ delta: Int) -> Int {
        guard k != 0 else { return 0 }
        if let i = cell(k) { values[i] &+= delta; return values[i] }
        insertNew(k, delta)
        return delta
    }

    private func insertNew(_ k: UInt, _ v: Int) {
        if (count &+ 1) &* 2 > capacity { grow() }
        let mask = capacity &- 1
        var i = home(k)
        while keys[i] != 0 { i = (i &+ 1) & mask }
        keys[i] = k
        values[i] = v
        count &+= 1
    }

    /// Removes `k` (when present).
    func remove(_ k: UInt) {
        guard var i = cell(k) else { return }
        let mask = capacity &- 1
        // Backward shift: move later entries of the probe run into the hole when their home
        // is not between the hole and their cell.
        var j = i
        while true {
            j = (j &+ 1) & mask
            let x = keys[j]
            if x == 0 { break }
            let h = home(x)
            let between = i <= j ? (i < h && h <= j) : (i < h || h <= j)
            if !between {
                keys[i] = x
                values[i] = values[j]
                i = j
            }
        }
        keys[i] = 0
        values[i] = 0
        count &-= 1
    }

    /// Removes every entry (keeping the storage).
    func removeAll() {
        guard count > 0 else { return }
        keys.update(repeating: 0, count: capacity)
        count = 0
    }

    /// Every (key, value), in table order.
    var entries: [(key: UInt, value: Int)] {
        var out: [(key: UInt, value: Int)] = []
        out.reserveCapacity(count)
        for i in 0..<capacity where keys[i] != 0 { out.append((keys[i], values[i])) }
        return out
    }

    private func grow() {
        let oldKeys = keys, oldValues = values, oldCapacity = capacity
        capacity = oldCapacity * 2
        shift -= 1
        keys = .allocate(capacity: capacity)
        keys.initialize(repeating: 0, count: capacity)
        values = .allocate(capacity: capacity)
        values.initialize(repeating: 0, count: capacity)
        count = 0
        for i in 0..<oldCapacity where oldKeys[i] != 0 { insertNew(oldKeys[i], oldValues[i]) }
        oldKeys.deallocate()
        oldValues.deallocate()
    }
}
