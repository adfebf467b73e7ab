import GraphIR

/// Stateful ops (MIL iOS18): `read_state`, `write_state`, `coreml_update_state`, and the iOS17
/// `slice_update` used to write KV-cache windows. State values live in ``StateBuffer``s that
/// outlive one call; a write rounds to the state's dtype (an fp16 state holds fp16 values).
/// These are the unfused forms: a `read_state` here widens a copy of the whole state (the KV
/// reads and writes of LLM graphs are fused in place, see ``StateUpdateFusion`` and
/// ``AttentionFusion``).
enum StateKernels {
    static let table: [String: Kernel] = [
        "read_state": readState,
        "write_state": writeState,
        "coreml_update_state": updateState,
        "slice_update": sliceUpdate,
    ]

    static func state(_ inv: KernelInvocation, _ name: String) throws -> StateBuffer {
        guard case let .state(s) = try inv.value(name) else { throw KernelError("input '\(name)' is not a state") }
        return s
    }

    /// `read_state(input)` → the state's current value (a widened copy).
    static func readState(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        [.tensor(try state(inv, "input").tensor())]
    }

    /// `write_state(input, data)`: no outputs.
    static func writeState(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        try state(inv, "input").write(try inv.tensor("data"))
        return []
    }

    /// `coreml_update_state(state, value)`: writes, then returns the stored (rounded) value.
    static func updateState(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let s = try state(inv, "state")
        try s.write(try inv.tensor("value"))
        return [.tensor(s.tensor())]
    }

    /// `slice_update(x, update, begin, end, stride?, begin_mask?, end_mask?, squeeze_mask?)`:
    /// `x` with the region `slice_by_index` would select replaced by `update`.
    static func sliceUpdate(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        var x = try inv.tensor("x")
        let update = try inv.tensor("update")
        let region = try SliceRegion(inv, shape: x.shape)
        guard update.shape == region.resultShape || (update.count == region.count && update.shape.filter { $0 != 1 } == region.resultShape.filter { $0 != 1 }) else {
            throw KernelError("update has shape \(update.shape), the slice selects \(region.resultShape) of x \(x.shape)")
        }
        let offsets = region.sourceOffsets()
        switch (x.data, update.data) {
        case (.float(var a), .float(let u)):
            for (i, o) in offsets.enumerated() { a[o] = u[i] }
            x.data = .float(a)
        case (.int(var a), .int(let u)):
            for (i, o) in offsets.enumerated() { a[o] = u[i] }
            x.data = .int(a)
        case (.bool(var a), .bool(let u)):
            for (i, o) in offsets.enumerated() { a[o] = u[i] }
            x.data = .bool(a)
        default:
            let u = update.floats
            var a = x.floats
            for (i, o) in offsets.enumerated() { a[o] = u[i] }
            x.data = .float(a)
        }
        return [.tensor(x)]
    }
}

/// The region `slice_by_index` selects (MIL iOS15 semantics; the one resolver for both
/// `slice_by_index` and `slice_update`) = numpy `x[b0:e0:s0, …]`: negative begin/end count from
/// the end and are then clamped (Python slice rules); `begin_mask` / `end_mask` take the first /
/// last element in the stride's direction; `squeeze_mask` indexes `begin` (0 when `begin_mask` is
/// also set, as the reference) and drops the axis — that index must exist.
public struct SliceRegion {
    public let shape: [Int]
    public let starts: [Int]
    public let steps: [Int]
    public let lengths: [Int]
    public let squeeze: [Bool]

    public init(shape: [Int], begin: [Int], end: [Int], stride: [Int]?, beginMask: [Bool]?, endMask: [Bool]?, squeezeMask: [Bool]?) throws {
        let r = shape.count
        guard begin.count == r, end.count == r else {
            throw KernelError("begin/end have \(begin.count)/\(end.count) entries, x has rank \(r)")
        }
        let stride = stride ?? [Int](repeating: 1, count: r)
        let bm = beginMask ?? [Bool](repeating: false, count: r)
        let em = endMask ?? [Bool](repeating: false, count: r)
        let sm = squeezeMask ?? [Bool](repeating: false, count: r)
        guard stride.count == r, bm.count == r, em.count == r, sm.count == r else {
            throw KernelError("stride/masks must have \(r) entries")
        }
        var starts = [Int](), lengths = [Int]()
        for a in 0..<r {
            let n = shape[a], s = stride[a]
            guard s != 0 else { throw KernelError("stride 0 on axis \(a)") }
            if sm[a] {
                // With begin_mask also set, the reference takes index 0.
                var b = bm[a] ? 0 : begin[a]
                if b < 0 { b += n }
                guard b >= 0, b < n else { throw KernelError("squeezed index \(begin[a]) outside dimension \(a) of size \(n)") }
                starts.append(b)
                lengths.append(1)
                continue
            }
            var b = begin[a], e = end[a]
            if s > 0 {
                if bm[a] { b = 0 } else { if b < 0 { b += n }; b = min(max(b, 0), n) }
                if em[a] { e = n } else { if e < 0 { e += n }; e = min(max(e, 0), n) }
                starts.append(b)
                lengths.append(e > b ? (e - b + s - 1) / s : 0)
            } else {
                if bm[a] { b = n - 1 } else { if b < 0 { b += n }; b = min(max(b, -1), n - 1) }
                if em[a] { e = -1 } else { if e < 0 { e += n }; e = min(max(e, -1), n - 1) }
                starts.append(b)
                lengths.append(b > e ? (b - e - s - 1) / -s : 0)
            }
        }
        self.shape = shape
        self.starts = starts
        self.steps = stride
        self.lengths = lengths
        self.squeeze = sm
    }

    /// Shape of the selected region with squeezed axes dropped.
    public var resultShape: [Int] { zip(lengths, squeeze).filter { !$1 }.map { $0.0 } }
    public var count: Int { lengths.reduce(1, *) }

    /// Flat offsets into `x` of every selected element, in row-major order of the region.
    public func sourceOffsets() -> [Int] {
        let strides = contiguousStrides(shape)
        let n = count
        guard n > 0 else { return [] }
        var out = [Int]()
        out.reserveCapacity(n)
        var start = 0
        for a in 0..<shape.count { start += starts[a] * strides[a] }
        var cursor = StridedCursor(shape: lengths, a: (0..<shape.count).map { steps[$0] * strides[$0] }, start: (start, 0, 0))
        for _ in 0..<n {
            out.append(cursor.offsetA)
            cursor.step()
        }
        return out
    }
}
