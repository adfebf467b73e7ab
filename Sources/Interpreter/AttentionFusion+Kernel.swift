import CKernels
import GraphIR

extension AttentionFusion {
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

    /// The fused attention through `fk_attention`: [H, S, D] floats. `kOffset` / `vOffset`:
    /// the element where KV head 0, row 0 starts in `k` / `v` (a layer of a stacked cache).
    /// - Throws: `KernelError` when the kernel's scratch cannot be allocated.
    static func run(_ p: Problem, q: [Float], k: KV, v: KV, mask: [Float], scale: Float,
                    kOffset: Int = 0, vOffset: Int = 0) throws -> [Float] {
        guard p.outCount > 0 else { return [] }
        guard p.ctx > 0 else { return [Float](repeating: 0, count: p.outCount) }  // no key column: zeros, as the graph gives
        // fk_attention writes every element (a computed row or a NaN row).
        var out: [Float] = BufferPool.uninitialized(p.outCount)
        let rc: Int32 = try k.withStorage { kp0, kHalf in
            try v.withStorage { vp0, vHalf in
                let kp = kp0 + kOffset * (kHalf ? 2 : 4), vp = vp0 + vOffset * (vHalf ? 2 : 4)
                return q.withUnsafeBufferPointer { qp in
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
            for j in cols { let e = FastExp.exp(scores[j] - maxv); scores[j] = e; denom += e }
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
