import Dispatch
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
/// exp(score − 1e4 − max), is exactly 0 in fp32 for any score below ~9900 in magnitude. Runs
/// only in `fp32` precision; `fp16` precision keeps the per-op rounding of the original ops.
enum AttentionFusion {
    static let maskedThreshold: Float = -1e4

    /// Rewrites `plan`'s steps in place. `useCount` counts reads of each slot.
    static func apply(_ plan: ExecutionPlan.BlockPlan, useCount: [Int: Int]) {
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
        /// kt = reshape(tile(expand_dims(k))) → (k slot, rep, steps to remove).
        func repeatedKV(_ s: Int?) -> (Int, Int, [Int])? {
            guard let (ir, reshape) = step(s, "reshape"), let (it, tile) = step(slot(reshape, "x"), "tile"),
                  let (ie, expand) = step(slot(tile, "x"), "expand_dims"), let k = slot(expand, "x"),
                  let axes = constInts(expand, "axes"), axes == [2],
                  let reps = constInts(tile, "reps"), reps.count == 5, reps[0] == 1, reps[1] == 1, reps[3] == 1, reps[4] == 1,
                  let shape = constInts(reshape, "shape"), shape.count == 4 else { return nil }
            return (k, reps[2], [ir, it, ie])
        }
        var remove = Set<Int>()
        var replace: [Int: ExecutionPlan.Step] = [:]
        for (i2, m2) in plan.steps.enumerated() where m2.op.type == "matmul" {
            guard constBool(m2, "transpose_x", default: false) == false, constBool(m2, "transpose_y", default: false) == false,
                  let (ip, sm) = step(slot(m2, "x"), "softmax"),
                  (constInts(sm, "axis") ?? [-1]) == [-1] || (constInts(sm, "axis") ?? []) == [3],
                  let (ia, add) = step(slot(sm, "x"), "add"),
                  let v = repeatedKV(slot(m2, "y")) else { continue }
            // add(x = scaled, y = mask) in either order.
            var scaledSlot = slot(add, "x"), maskSlot = slot(add, "y")
            if let s = scaledSlot, let p = producer[s], !["mul", "real_div"].contains(plan.steps[p].op.type) { swap(&scaledSlot, &maskSlot) }
            guard let maskSlot, let scaleStep = scaledSlot.flatMap({ s -> (Int, ExecutionPlan.Step)? in step(s, "mul") ?? step(s, "real_div") }) else { continue }
            let (iscale, mul) = scaleStep
            guard let sv = constInts(mul, "y") == nil ? constScalar(mul, "y", producer: producer, plan: plan) : nil,
                  let (i1, m1) = step(slot(mul, "x"), "matmul"),
                  constBool(m1, "transpose_x", default: false) == false, constBool(m1, "transpose_y", default: false) == true,
                  let q = slot(m1, "x"), let k = repeatedKV(slot(m1, "y")), k.1 == v.1 else { continue }
            let scale = mul.op.type == "mul" ? sv : 1 / sv
            let rep = k.1
            let fused = ExecutionPlan.Step(
                op: m2.op, kernel: kernel(scale: scale, rep: rep),
                inputs: [(name: "query", refs: [.slot(q)]), (name: "key", refs: [.slot(k.0)]),
                         (name: "value", refs: [.slot(v.0)]), (name: "mask", refs: [.slot(maskSlot)])],
                outputSlots: m2.outputSlots, release: [], isConstant: false, blocks: [])
            replace[i2] = fused
            for r in [ip, ia, iscale, i1] + k.2 + v.2 { remove.insert(r) }
        }
        guard !replace.isEmpty else { return }
        plan.steps = plan.steps.enumerated().compactMap { i, st in
            if remove.contains(i) { return nil }
            return replace[i] ?? st
        }
    }

    static func constScalar(_ st: ExecutionPlan.Step, _ name: String, producer: [Int: Int], plan: ExecutionPlan.BlockPlan) -> Float? {
        guard let r = st.inputs.first(where: { $0.name == name })?.refs, r.count == 1, case let .slot(s) = r[0],
              let i = producer[s], plan.steps[i].op.type == "const", let c = plan.steps[i].op.constValue,
              let d = c.doubles(), d.count == 1 else { return nil }
        return Float(d[0])
    }

    /// q [1, H, S, D], k/v [1, KV, CTX, D] (H = KV·rep), mask broadcastable to [1, H, S, CTX].
    static func kernel(scale: Float, rep: Int) -> Kernel {
        return { inv in
            let q = try inv.tensor("query"), k = try inv.tensor("key"), v = try inv.tensor("value"), mask = try inv.tensor("mask")
            guard q.rank == 4, k.rank == 4, v.rank == 4, q.shape[0] == 1, k.shape[0] == 1,
                  k.shape == v.shape, q.shape[3] == k.shape[3], q.shape[1] == k.shape[1] * rep else {
                throw KernelError("fused attention: query \(q.shape), key \(k.shape), value \(v.shape) do not fit grouped attention with \(rep) query heads per KV head")
            }
            let h = q.shape[1], s = q.shape[2], d = q.shape[3], ctx = k.shape[2]
            // Mask strides for broadcasting to [1, H, S, CTX].
            let mr = mask.rank
            guard mr >= 2, mask.shape[mr - 1] == ctx, mask.shape[mr - 2] == s || mask.shape[mr - 2] == 1 else {
                throw KernelError("fused attention: mask \(mask.shape) does not broadcast to [1, \(h), \(s), \(ctx)]")
            }
            let mHeadStride = (mr >= 3 && mask.shape[mr - 3] == h) ? mask.shape[mr - 2] * ctx : 0
            let mRowStride = mask.shape[mr - 2] == s ? ctx : 0
            let qf = q.floats, kf = k.floats, vf = v.floats, mf = mask.floats
            var out = BufferPool.zeros(h * s * d)
            qf.withUnsafeBufferPointer { qp in kf.withUnsafeBufferPointer { kp in vf.withUnsafeBufferPointer { vp in
                mf.withUnsafeBufferPointer { mp in out.withUnsafeMutableBufferPointer { op in
                    let qb = qp.baseAddress!, kb = kp.baseAddress!, vb = vp.baseAddress!, mb = mp.baseAddress!
                    let ob = op.baseAddress!
                    let work = h * s
                    let body: (Int) -> Void = { task in
                        let head = task / s, row = task % s, kvh = head / rep
                        let qrow = qb + (head * s + row) * d
                        let mrow = mb + head * mHeadStride + row * mRowStride
                        let kbase = kb + kvh * ctx * d, vbase = vb + kvh * ctx * d
                        var scores = [Float](repeating: 0, count: ctx)
                        var cols = [Int32]()
                        cols.reserveCapacity(ctx)
                        var maxv = -Float.infinity
                        // Every column masked: attend over all of them, as the graph's softmax does.
                        var threshold = maskedThreshold
                        if !(0..<ctx).contains(where: { mrow[$0] > maskedThreshold }) { threshold = -.infinity }
                        for j in 0..<ctx where mrow[j] > threshold {
                            let kr = kbase + j * d
                            var acc = SIMD8<Float>()
                            var t = 0
                            while t + 8 <= d {
                                acc += UnsafeRawPointer(qrow + t).loadUnaligned(as: SIMD8<Float>.self) * UnsafeRawPointer(kr + t).loadUnaligned(as: SIMD8<Float>.self)
                                t += 8
                            }
                            var sum = acc.sum()
                            while t < d { sum += qrow[t] * kr[t]; t += 1 }
                            let sc = sum * scale + mrow[j]
                            scores[j] = sc
                            cols.append(Int32(j))
                            if sc > maxv { maxv = sc }
                        }
                        let orow = ob + (head * s + row) * d
                        guard !cols.isEmpty else {
                            for t in 0..<d { orow[t] = .nan }  // a NaN mask: NaN, as the graph gives
                            return
                        }
                        var denom: Float = 0
                        for j in cols { let e = expf(scores[Int(j)] - maxv); scores[Int(j)] = e; denom += e }
                        let inv = 1 / denom
                        for t in 0..<d { orow[t] = 0 }
                        for j in cols {
                            let w = scores[Int(j)] * inv
                            let vr = vbase + Int(j) * d
                            var t = 0
                            while t + 8 <= d {
                                let o = UnsafeRawPointer(orow + t).loadUnaligned(as: SIMD8<Float>.self) + w * UnsafeRawPointer(vr + t).loadUnaligned(as: SIMD8<Float>.self)
                                UnsafeMutableRawPointer(orow + t).storeBytes(of: o, as: SIMD8<Float>.self)
                                t += 8
                            }
                            while t < d { orow[t] += w * vr[t]; t += 1 }
                        }
                    }
                    if work >= 4 && work * ctx * d >= 1 << 16 {
                        DispatchQueue.concurrentPerform(iterations: work, execute: body)
                    } else {
                        for task in 0..<work { body(task) }
                    }
                } }
            } } }
            return [.tensor(Tensor(inv.outputDType(), shape: [1, h, s, d], floats: out))]
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
