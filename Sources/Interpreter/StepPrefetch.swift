import CKernels
import Foundation

/// Prefetching the records the next steps of a run will read, while the current one runs.
///
/// A decode step of an LLM streams every weight once (SmolLM2-135M int8: 143 MB a token), which
/// flushes the caches, so each of the ~770 running steps then finds its own records cold: the
/// `Step`, its operand and output lists, the slots it reads, the constants' storage. Those
/// misses come one after another (each the address of the next), ~0.1 µs each. Once a block's
/// running steps are known (``BlockPlan/running``) the plan records, per step, the lines of its
/// records; running step *i* issues prefetches for those of step *i* + ``distance`` (and the
/// slot entries of step *i* + 1), so the misses overlap with the step that runs. A hint only:
/// prefetch instructions, nothing read through them, no numerics change.
/// `FORGE_STEP_PREFETCH=0` turns it off (for A/B measurements).
extension ExecutionPlan {
    static let stepPrefetch = ProcessInfo.processInfo.environment["FORGE_STEP_PREFETCH"] != "0"

    /// The lines to prefetch for each running step of a block.
    final class StepPrefetchTable {
        /// Steps ahead whose records are fetched.
        static let distance = 2
        /// Line addresses, step by step (`bounds[i] ..< bounds[i + 1]`).
        let addrs: [UInt]
        let bounds: [Int]
        /// Slot indices read by each step (`slotBounds[i] ..< slotBounds[i + 1]`): their entries
        /// in the run's slot array, whose address changes from run to run.
        let slots: [Int]
        let slotBounds: [Int]

        init(addrs: [UInt], bounds: [Int], slots: [Int], slotBounds: [Int]) {
            self.addrs = addrs
            self.bounds = bounds
            self.slots = slots
            self.slotBounds = slotBounds
        }

        /// Issues the prefetches for running step `i` (its records) and step `i - distance + 1`
        /// (its slot entries, in the array at `slotBase`).
        @inline(__always)
        func issue(step i: Int, slotBase: UnsafeRawPointer?) {
            if i + 1 < bounds.count {
                addrs.withUnsafeBufferPointer { a in
                    let lo = bounds[i], hi = bounds[i + 1]
                    if hi > lo { fk_prefetch_lines(a.baseAddress! + lo, hi - lo) }
                }
            }
            let j = i - StepPrefetchTable.distance + 1
            guard let slotBase, j >= 0, j + 1 < slotBounds.count else { return }
            let stride = MemoryLayout<RuntimeValue?>.stride
            let base = UInt(bitPattern: slotBase)
            let lo = slotBounds[j], n = min(slotBounds[j + 1] - lo, 8)
            guard n > 0 else { return }
            withUnsafeTemporaryAllocation(of: UInt.self, capacity: 8) { p in
                for k in 0..<n { p[k] = base + UInt(slots[lo + k] * stride) }
                fk_prefetch_lines(p.baseAddress!, n)
            }
        }
    }

    /// Builds the prefetch table of `plan`'s running steps (once they are known).
    func buildStepPrefetch(_ plan: BlockPlan) {
        guard ExecutionPlan.stepPrefetch, let running = plan.running, running.count > StepPrefetchTable.distance else { return }
        var addrs: [UInt] = [], bounds = [0], slots: [Int] = [], slotBounds = [0]
        func object(_ o: AnyObject, lines: Int) {
            let b = UInt(bitPattern: Unmanaged.passUnretained(o).toOpaque())
            for l in 0..<lines { addrs.append(b + UInt(l * 64)) }
        }
        // An array's header (its reference count, touched by every retain) and first elements.
        func array<T>(_ a: [T]) {
            guard !a.isEmpty else { return }
            a.withUnsafeBufferPointer { p in
                guard let b = p.baseAddress else { return }
                let u = UInt(bitPattern: b)
                addrs.append(u &- 32)
                if (u &- 32) / 64 != u / 64 { addrs.append(u) }
            }
        }
        /// The header of a cached constant's storage (read and retained when it is an operand).
        func storage(_ v: RuntimeValue) {
            switch v {
            case let .tensor(t):
                switch t.data {
                case let .float(a): array(a)
                case let .int(a): array(a)
                case let .bool(a): array(a)
                case .string: break
                }
                array(t.shape)
            case let .quantized(q): object(q, lines: 1)
            default: break
            }
        }
        let cacheStride = MemoryLayout<RuntimeValue?>.stride
        constantCache.withUnsafeBufferPointer { cache in
            let cacheBase = UInt(bitPattern: cache.baseAddress)
            for st in running {
                object(st, lines: 3)
                object(st.op, lines: 1)
                array(st.operands)
                array(st.outputSlots)
                array(st.release)
                array(st.outputDTypes)
                for r in st.operands {
                    switch r {
                    case let .slot(s):
                        if s >= 0, s < constantOpCache.count, let v = constantOpCache[s] { storage(v) } else if s >= 0 { slots.append(s) }
                    case let .constant(i):
                        if cacheBase != 0 { addrs.append(cacheBase + UInt(i * cacheStride)) }
                        if let v = cache[i] { storage(v) }
                    }
                }
                bounds.append(addrs.count)
                slotBounds.append(slots.count)
            }
        }
        plan.prefetch = StepPrefetchTable(addrs: addrs, bounds: bounds, slots: slots, slotBounds: slotBounds)
    }
}
