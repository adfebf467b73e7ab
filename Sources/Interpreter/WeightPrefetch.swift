import CKernels
import Foundation

/// Prefetching the next product's weights while the small ops before it run.
///
/// A decode step streams every weight from DRAM once (SmolLM2-135M int8: 143 MB a token) and
/// between the products runs a few dozen small ops (norms, RoPE, attention, residual adds) on
/// the calling thread while the pool worker spins idle. After a `linear` whose next `linear`
/// is not the very next step, the plan hands the first MiB of that next weight (int8 / int4 blocks or fp16, read in place) to
/// the idle worker (`fk_parallel_prefetch`), so the product starts on lines already in cache.
/// A hint only: no numerics change, nothing is read through it but prefetch instructions.
/// `FORGE_WEIGHT_PREFETCH=0` turns it off (for A/B measurements).
extension ExecutionPlan {
    static let weightPrefetch = ProcessInfo.processInfo.environment["FORGE_WEIGHT_PREFETCH"] != "0"

    /// Marks each `linear` step followed, after at least one other step, by another `linear`
    /// with that one's `weight` operand (``Step/prefetchAfter``); root block only (called once
    /// the steps are final).
    func installWeightPrefetch() {
        guard ExecutionPlan.weightPrefetch, fk_parallel_width() > 1 else { return }
        let steps = root.steps
        var next: ExecutionPlan.Ref? = nil
        var nextIndex = Int.max
        for i in steps.indices.reversed() {
            let st = steps[i]
            guard st.op.type == "linear", st.blocks.isEmpty else { continue }
            if let next, nextIndex > i + 1 { st.prefetchAfter = next }
            if let w = st.inputNames.firstIndex(of: "weight"), st.inputBounds[w + 1] == st.inputBounds[w] + 1 {
                next = st.operands[st.inputBounds[w]]
                nextIndex = i
            } else {
                next = nil
            }
        }
    }

    /// Issues the prefetch of `step`'s ``Step/prefetchAfter`` weight when it is a constant
    /// read in place: int8 / packed int4 blocks, or fp16 (Apple's fp16 Llama 3.1 recipe).
    @inline(__always)
    func prefetchWeight(after step: Step, slots: [RuntimeValue?]) {
        guard let ref = step.prefetchAfter, let v = try? resolve(ref, slots: slots) else { return }
        switch v {
        case let .quantized(q): fk_parallel_prefetch(UnsafeRawPointer(q.data.base), q.data.bytes)
        case let .halfBlob(_, h): fk_parallel_prefetch(UnsafeRawPointer(h.base), h.count * 2)
        default: return
        }
    }
}
