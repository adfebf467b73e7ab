import CKernels
import GraphIR

/// Execution-level fusion of grouped-query attention over a KV cache (never written back):
///
/// ```
/// kt = reshape(tile(expand_dims(k, axes = [2]), reps = [1, 1, rep, 1, 1]), [1, KV·rep, CTX, D])
/// vt = … the same for v
/// s  = matmul(x = q, y = kt, transpose_y = true)      // [1, H, S, CTX]
/// s2 = mul(x = s, y = scale)                           // or real_div by a constant
/// s3 = add(x = s2, y = mask)                           // additive mask [.., S, CTX]
/// p  = softmax(x = s3, axis = -1)
/// o  = matmul(x = p, y = vt)                           // [1, H, S, D]
/// ```
/// becomes one kernel that reads `k`/`v` with head `h` mapped to KV head `h / rep` (no tiled
/// copy) and skips key columns whose additive mask is ≤ −1e4: their softmax weight,
/// exp(score − 1e4 − max), is exactly 0 in fp32 for any score below ~9900 in magnitude. When
/// every column of a row is masked, the row attends over all columns with mask > −inf, as the
/// graph's softmax does; a NaN mask value is never skipped (the row is NaN, as the graph's
/// softmax gives), and a row left without columns (all −inf mask) is NaN. Runs
/// only in `fp32` precision; `fp16` precision keeps the per-op rounding of the original ops.
///
/// When `k` (or `v`) is `read_state(input = cache)` read by nothing but this chain, and no op
/// between that read and the attention takes the state, the `read_state` goes too: the kernel
/// reads the state's storage in place (fp16 bits or fp32), only at unmasked columns, instead
/// of a widened copy of the whole cache per call. The inner loops are C (`fk_attention`,
/// CKAttention.h); ``reference(_:q:k:v:mask:scale:)`` is the Swift form they match bit for bit.
enum AttentionFusion {
    static let maskedThreshold: Float = -1e4

    /// Rewrites `plan`'s steps in place. `useCount` counts reads of each slot; a chain whose
    /// removed steps produce a `protected` slot (an observed value) is left unfused.
    static func apply(_ plan: ExecutionPlan.BlockPlan, useCount: [Int: Int], protected: Set<Int> = []) {
        var producer: [Int: Int] = [:]
        for (i, st) in plan.steps.enumerated() { for s in st.outputSlots { producer[s] = i } }
        func slot(_ st: ExecutionPlan.Step, _ name: String) -> Int? {
            guard let r = st.inputs.first(where: { $0.name == name })?.refs, r.count == 1, case let .slot(s) = r[0] else { return nil }
            return s
        }
        func step(_ s: Int?, _ type: String) -> (Int, ExecutionPlan.Step)? {
            guard let s, useCount[s] == 1, let i = producer[s], plan.steps[i].op.type == type else { return nil }
            return (i, plan.steps[i])
        }
        func constInts(_ st: ExecutionPlan.Step, _ name: String) -> [Int]? {
            guard let s = slot(st, name), let i = producer[s], plan.steps[i].op.type == "const",
                  let c = plan.steps[i].op.constValue else { return nil }
            return c.ints()
        }
        func constBool(_ st: ExecutionPlan.Step, _ name: String, default d: Bool) -> Bool? {
            guard st.inputs.contains(where: { $0.name == name }) else { return d }
            guard let v = constInts(st, name), v.count == 1 else { return nil }
            return v[0] != 0
        }
        /// kt = reshape(tile(expand_dims(k))) → (k slot, rep, steps to remove). `k` is the
        /// state slot itself when it is a `read_state` that only this chain reads.
        func repeatedKV(_ s: Int?, readBy user: Int) -> (Int, Int, [Int])? {
            guard let (ir, reshape) = step(s, "reshape"), let (it, tile) = step(slot(reshape, "x"), "tile"),
                  let (ie, expand) = step(slot(tile, "x"), "expand_dims"), let k = slot(expand, "x"),
                  let axes = constInts(expand, "axes"), axes == [2],
                  let reps = constInts(tile, "reps"), reps.count == 5, reps[0] == 1, reps[1] == 1, reps[3] == 1, reps[4] == 1,
                  let shape = constInts(reshape, "shape"), shape.count == 4 else { return nil }
            if let (irs, read) = step(k, "read_state"), let state = slot(read, "input"), irs < user,
               !takes(state, in: plan.steps[(irs + 1)..<user]) {
                return (state, reps[2], [ir, it, ie, irs])
            }
            return (k, reps[2], [ir, it, ie])
        }
        var remove = Set<Int>()
        var replace: [Int: ExecutionPlan.Step] = [:]
        for (i2, m2) in plan.steps.enumerated() where m2.op.type == "matmul" {
            guard constBool(m2, "transpose_x", default: false) == false, constBool(m2, "transpose_y", default: false) == false,
                  let (ip, sm) = step(slot(m2, "x"), "softmax"),
                  (constInts(sm, "axis") ?? [-1]) == [-1] || (constInts(sm, "axis") ?? []) == [3],
                  let (ia, add) = step(slot(sm, "x"), "add"),
                  let v = repeatedKV(slot(m2, "y"), readBy: i2) else { continue }
            // add(x = scaled, y = mask) in either order.
            var scaledSlot = slot(add, "x"), maskSlot = slot(add, "y")
            if let s = scaledSlot, let p = producer[s], !["mul", "real_div"].contains(plan.steps[p].op.type) { swap(&scaledSlot, &maskSlot) }
            guard let maskSlot, let scaleStep = scaledSlot.flatMap({ s -> (Int, ExecutionPlan.Step)? in step(s, "mul") ?? step(s, "real_div") }) else { continue }
            let (iscale, mul) = scaleStep
            guard let sv = constInts(mul, "y") == nil ? constScalar(mul, "y", producer: producer, plan: plan) : nil,
                  let (i1, m1) = step(slot(mul, "x"), "matmul"),
                  constBool(m1, "transpose_x", default: false) == false, constBool(m1, "transpose_y", default: false) == true,
                  let q = slot(m1, "x"), let k = repeatedKV(slot(m1, "y"), readBy: i2), k.1 == v.1 else { continue }
            let removed = [ip, ia, iscale, i1] + k.2 + v.2
            if !protected.isEmpty, removed.contains(where: { plan.steps[$0].outputSlots.contains(where: protected.contains) }) { continue }
            let scale = mul.op.type == "mul" ? sv : 1 / sv
            let rep = k.1
            let fused = ExecutionPlan.Step(
                op: m2.op, kernel: kernel(scale: scale, rep: rep),
                inputs: [(name: "query", refs: [.slot(q)]), (name: "key", refs: [.slot(k.0)]),
                         (name: "value", refs: [.slot(v.0)]), (name: "mask", refs: [.slot(maskSlot)])],
                outputSlots: m2.outputSlots, release: [], isConstant: false, blocks: [])
            replace[i2] = fused
            for r in removed { remove.insert(r) }
        }
        guard !replace.isEmpty else { return }
        plan.steps = plan.steps.enumerated().compactMap { i, st in
            if remove.contains(i) { return nil }
            return replace[i] ?? st
        }
    }

    /// Whether any of `steps` (nested blocks included) takes state `slot` other than through
    /// `read_state`: a write, or any op that could change it.
    static func takes(_ slot: Int, in steps: ArraySlice<ExecutionPlan.Step>) -> Bool {
        steps.contains { st in
            if st.op.type != "read_state" && st.inputs.contains(where: { $0.refs.contains { if case let .slot(s) = $0 { return s == slot } else { return false } } }) {
                return true
            }
            return st.blocks.contains { takes(slot, in: $0.steps[...]) }
        }
    }

    static func constScalar(_ st: ExecutionPlan.Step, _ name: String, producer: [Int: Int], plan: ExecutionPlan.BlockPlan) -> Float? {
        guard let r = st.inputs.first(where: { $0.name == name })?.refs, r.count == 1, case let .slot(s) = r[0],
              let i = producer[s], plan.steps[i].op.type == "const", let c = plan.steps[i].op.constValue,
              let d = c.doubles(), d.count == 1 else { return nil }
        return Float(d[0])
    }

    /// The sizes of one fused attention call, checked against each other.
    struct Problem {
        let h: Int, s: Int, d: Int, ctx: Int, rep: Int
        /// Mask element strides of the head and row axes (0 = broadcast).
        let maskHeadStride: Int, maskRowStride: Int

        /// q [1, H, S, D], k/v [1, KV, CTX, D] (H = KV·rep), mask [.., S or 1, CTX] with at most
        /// an H axis before.
        /// - Throws: `KernelError` naming the shapes that do not fit.
        init(q: [Int], k: [Int], v: [Int], mask: [Int], rep: Int) throws {
            guard rep >= 1, q.count == 4, k.count == 4, v.count == 4, q[0] == 1, k[0] == 1,
                  k == v, q[3] == k[3], q[1] == k[1] * rep else {
                throw KernelError("fused attention: query \(q), key \(k), value \(v) do not fit grouped attention with \(rep) query heads per KV head")
            }
            h = q[1]; s = q[2]; d = q[3]; ctx = k[2]
            self.rep = rep
            let mr = mask.count
            guard mr >= 2, mask[mr - 1] == ctx, mask[mr - 2] == s || mask[mr - 2] == 1 else {
                throw KernelError("fused attention: mask \(mask) does not broadcast to [1, \(h), \(s), \(ctx)]")
            }
            let perHead = mr >= 3 && mask[mr - 3] == h && h != 1
            maskHeadStride = perHead ? mask[mr - 2] * ctx : 0
            maskRowStride = mask[mr - 2] == s ? ctx : 0
            let lead = mask.dropLast(perHead ? 3 : 2).reduce(1, *)
            guard lead == 1 else {
                throw KernelError("fused attention: mask \(mask) does not broadcast to [1, \(h), \(s), \(ctx)]")
            }
        }

        var outCount: Int { h * s * d }
    }

    /// A key or value operand: a state read in place, or a tensor.
    enum KV {
        case state(StateBuffer)
        case tensor(Tensor)

        init(_ v: RuntimeValue) throws {
            if case let .state(s) = v { self = .state(s) } else { self = .tensor(try v.dense()) }
        }

        var shape: [Int] {
            switch self {
            case let .state(s): return s.shape
            case let .tensor(t): return t.shape
            }
        }

        /// `body(values, half)`: binary16 bits when `half`, else floats. Never empty.
        func withStorage<R>(_ body: (UnsafeRawPointer, Bool) throws -> R) throws -> R {
            func floats(_ a: [Float]) throws -> R {
                guard !a.isEmpty else { throw KernelError("fused attention: empty key / value") }
                return try a.withUnsafeBufferPointer { try body(UnsafeRawPointer($0.baseAddress!), false) }
            }
            switch self {
            case let .state(s):
                switch s.storage {
                case let .half(p): return try body(UnsafeRawPointer(p), true)
                case let .float(p): return try body(UnsafeRawPointer(p), false)
                case let .tensor(t): return try floats(t.floats)
                }
            case let .tensor(t): return try floats(t.floats)
            }
        }
    }

    /// q [1, H, S, D], k/v [1, KV, CTX, D] (H = KV·rep), mask broadcastable to [1, H, S, CTX].
    /// `key` / `value` may be states (read in place) or tensors.
    static func kernel(scale: Float, rep: Int) -> Kernel {
        return { inv in
            let q = try inv.tensor("query"), mask = try inv.tensor("mask")
            let k = try KV(inv.value("key")), v = try KV(inv.value("value"))
            let p = try Problem(q: q.shape, k: k.shape, v: v.shape, mask: mask.shape, rep: rep)
            let out = try run(p, q: q.floats, k: k, v: v, mask: mask.floats, scale: scale)
            return [.tensor(Tensor(inv.outputDType(), shape: [1, p.h, p.s, p.d], floats: out))]
        }
    }

    /// The fused attention through `fk_attention`: [H, S, D] floats.
    /// - Throws: `KernelError` when the kernel's scratch cannot be allocated.
    static func run(_ p: Problem, q: [Float], k: KV, v: KV, mask: [Float], scale: Float) throws -> [Float] {
        guard p.outCount > 0 else { return [] }
        guard p.ctx > 0 else { return [Float](repeating: .nan, count: p.outCount) }
        // fk_attention writes every element (a computed row or a NaN row).
        var out: [Float] = BufferPool.uninitialized(p.outCount)
        let rc: Int32 = try k.withStorage { kp, kHalf in
            try v.withStorage { vp, vHalf in
                q.withUnsafeBufferPointer { qp in
                    mask.withUnsafeBufferPointer { mp in
                        out.withUnsafeMutableBufferPointer { op in
                            var desc = fk_attention_desc(
                                heads: p.h, rows: p.s, dim: p.d, ctx: p.ctx, rep: p.rep,
                                q: qp.baseAddress, k: kp, v: vp, k_half: kHalf ? 1 : 0, v_half: vHalf ? 1 : 0,
                                mask: mp.baseAddress, mask_head_stride: p.maskHeadStride, mask_row_stride: p.maskRowStride,
                                scale: scale, masked: maskedThreshold, out: op.baseAddress)
                            return fk_attention(&desc)
                        }
                    }
                }
            }
        }
        guard rc == 0 else { throw KernelError("fused attention: no memory for the kernel's scratch (code \(rc))") }
        return out
    }

    /// The Swift form of the kernel, on widened K / V ([KV, CTX, D] floats): one (head, row)
    /// at a time, serial. `fk_attention` gives the same bits (same operations in the same
    /// order, no fused multiply-add). For tests.
    static func reference(_ p: Problem, q qf: [Float], k kf: [Float], v vf: [Float], mask mf: [Float], scale: Float) -> [Float] {
        let (h, s, d, ctx, rep) = (p.h, p.s, p.d, p.ctx, p.rep)
        var out = [Float](repeating: 0, count: h * s * d)
        for task in 0..<(h * s) {
            let head = task / s, row = task % s, kvh = head / rep
            let qrow = (head * s + row) * d
            let mrow = head * p.maskHeadStride + row * p.maskRowStride
            let kbase = kvh * ctx * d
            var scores = [Float](repeating: 0, count: ctx)
            var cols = [Int]()
            var maxv = -Float.infinity
            // Every column masked: attend over all of them, as the graph's softmax does.
            var threshold = maskedThreshold
            if !(0..<ctx).contains(where: { mf[mrow + $0] > maskedThreshold || mf[mrow + $0].isNaN }) { threshold = -.infinity }
            for j in 0..<ctx where mf[mrow + j] > threshold || mf[mrow + j].isNaN {
                let kr = kbase + j * d
                var acc = SIMD8<Float>()
                var t = 0
                while t + 8 <= d {
                    acc += SIMD8<Float>(qf[(qrow + t)..<(qrow + t + 8)]) * SIMD8<Float>(kf[(kr + t)..<(kr + t + 8)])
                    t += 8
                }
                var sum = acc.sum()
                while t < d { sum += qf[qrow + t] * kf[kr + t]; t += 1 }
                let sc = sum * scale + mf[mrow + j]
                scores[j] = sc
                cols.append(j)
                if sc > maxv { maxv = sc }
            }
            let orow = (head * s + row) * d
            guard !cols.isEmpty else {
                for t in 0..<d { out[orow + t] = .nan }  // an all −inf mask: NaN, as the graph gives
                continue
            }
            var denom: Float = 0
            for j in cols { let e = expf(scores[j] - maxv); scores[j] = e; denom += e }
            let inv = 1 / denom
            for j in cols {
                let w = scores[j] * inv
                let vr = kbase + j * d
                var t = 0
                while t + 8 <= d {
                    let o = SIMD8<Float>(out[(orow + t)..<(orow + t + 8)]) + w * SIMD8<Float>(vf[(vr + t)..<(vr + t + 8)])
                    for i in 0..<8 { out[orow + t + i] = o[i] }
                    t += 8
                }
                while t < d { out[orow + t] += w * vf[vr + t]; t += 1 }
            }
        }
        return out
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
