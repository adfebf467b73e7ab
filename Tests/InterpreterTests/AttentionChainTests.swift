import GraphIR
@testable import Interpreter
import TestSupport
import XCTest

/// The attention fusion recognises what the K / V chain computes, not one op order: a layer of
/// a stacked `[L, 1, KV, CTX, D]` state sliced to the live rows (Apple's recipe), GQA through
/// `transpose` → `tile` → `reshape` → `transpose` (`repeat_interleave`), and a `tile` that maps
/// head h to h % KV (not grouped attention: the fused step runs the original ops). Each fused
/// plan gives the unfused plan's outputs (every op on its own, `observing: .all`).
final class AttentionChainTests: XCTestCase {
    let (h, kv, s, d, ctx, layers) = (4, 2, 2, 8, 6, 3)

    enum Chain { case stackedRepeatKV, repeatInterleave, tileModulo }

    func build(_ chain: Chain) -> Function {
        let b = ProgramBuilder()
        let rep = h / kv
        let stacked = chain == .stackedRepeatKV
        let cacheShape = stacked ? [layers, 1, kv, ctx, d] : [1, kv, ctx, d]
        let cache: MILType = .tensor(.fp16, cacheShape)
        let q = b.input("q", .tensor(.fp32, [1, h, s, d]))
        let live = b.input("live", .tensor(.int32, [1]))  // rows of the cache read (Apple: END)
        let mask = b.input("mask", .tensor(.fp32, [1, 1, s, stacked ? 5 : ctx]))
        let kc = b.input("k_cache", .state(cache)), vc = b.input("v_cache", .state(cache))
        func operand(_ state: Value, _ n: String) -> Value {
            let r = b.apply("read_state", ["input": state], cache, name: "\(n)_read")
            switch chain {
            case .stackedRepeatKV:
                // cache[1] (squeezed) then [:, :, :live, :], then repeat_kv.
                let l = b.apply("slice_by_index", ["x": r, "begin": b.const("\(n)_b0", ints: [1, 0, 0, 0, 0], shape: [5]),
                                                   "end": b.const("\(n)_e0", ints: [2, 1, Int32(kv), Int32(ctx), Int32(d)], shape: [5]),
                                                   "squeeze_mask": b.const("\(n)_sq", bools: [true, false, false, false, false], shape: [5])],
                                .tensor(.fp16, [1, kv, ctx, d]))
                let zero = b.const("\(n)_z", ints: [0, 0, 0], shape: [3])
                let end = b.apply("concat", ["axis": b.const("\(n)_ax", ints: [0], shape: []), "interleave": b.const("\(n)_il", bools: [false], shape: [])],
                                  .tensor(.int32, [4]), variadic: ["values": [b.const("\(n)_e1a", ints: [1, Int32(kv)], shape: [2]), live,
                                                                              b.const("\(n)_e1b", ints: [Int32(d)], shape: [1])]])
                _ = zero
                let t = b.apply("slice_by_index", ["x": l, "begin": b.const("\(n)_b1", ints: [0, 0, 0, 0], shape: [4]), "end": end],
                                .tensor(.fp16, [1, kv, 5, d]))
                let e = b.apply("expand_dims", ["x": t, "axes": b.const("\(n)_axes", ints: [2], shape: [1])], .tensor(.fp16, [1, kv, 1, 5, d]))
                let tl = b.apply("tile", ["x": e, "reps": b.const("\(n)_reps", ints: [1, 1, Int32(rep), 1, 1], shape: [5])], .tensor(.fp16, [1, kv, rep, 5, d]))
                return b.apply("reshape", ["x": tl, "shape": b.const("\(n)_shape", ints: [1, Int32(h), -1, Int32(d)], shape: [4])], .tensor(.fp16, [1, h, 5, d]))
            case .repeatInterleave:
                let t0 = b.apply("transpose", ["x": r, "perm": b.const("\(n)_p0", ints: [1, 0, 2, 3], shape: [4])], .tensor(.fp16, [kv, 1, ctx, d]))
                let tl = b.apply("tile", ["x": t0, "reps": b.const("\(n)_reps", ints: [Int32(rep), 1, 1, 1], shape: [4])], .tensor(.fp16, [h, 1, ctx, d]))
                let r1 = b.apply("reshape", ["x": tl, "shape": b.const("\(n)_s1", ints: [Int32(rep), Int32(kv), 1, Int32(ctx), Int32(d)], shape: [5])],
                                 .tensor(.fp16, [rep, kv, 1, ctx, d]))
                let t1 = b.apply("transpose", ["x": r1, "perm": b.const("\(n)_p1", ints: [1, 0, 2, 3, 4], shape: [5])], .tensor(.fp16, [kv, rep, 1, ctx, d]))
                let r2 = b.apply("reshape", ["x": t1, "shape": b.const("\(n)_s2", ints: [Int32(h), 1, Int32(ctx), Int32(d)], shape: [4])], .tensor(.fp16, [h, 1, ctx, d]))
                return b.apply("transpose", ["x": r2, "perm": b.const("\(n)_p2", ints: [1, 0, 2, 3], shape: [4])], .tensor(.fp16, [1, h, ctx, d]))
            case .tileModulo:
                return b.apply("tile", ["x": r, "reps": b.const("\(n)_reps", ints: [1, Int32(rep), 1, 1], shape: [4])], .tensor(.fp16, [1, h, ctx, d]))
            }
        }
        _ = live
        let k = operand(kc, "k"), v = operand(vc, "v")
        let o = b.apply("scaled_dot_product_attention", ["query": q, "key": k, "value": v, "attn_mask": mask], .tensor(.fp32, [1, h, s, d]), name: "o")
        return b.function(outputs: [o])
    }

    func run(_ f: Function, observing: ObservedValues) throws -> ([Float], ExecutionPlan) {
        let plan = try ExecutionPlan(function: f, observing: observing)
        let (inputs, states) = try feeds(f)
        let out = try plan.run(inputs: inputs, states: states)
        return (try XCTUnwrap(out["o"]).floats, plan)
    }

    /// Seeded inputs and states of `f`.
    func feeds(_ f: Function) throws -> ([String: Tensor], [String: StateBuffer]) {
        var states: [String: StateBuffer] = [:]
        var g = KVCacheFusionTests.Rand(state: 3)
        for v in f.stateInputs {
            let st = try StateBuffer(name: v.name, type: v.type.stateWrappedTensor!)
            try st.write(Tensor(.fp16, shape: st.shape, floats: g.array(st.count)))
            states[v.name] = st
        }
        let cols = f.inputs.first { $0.name == "mask" }!.type.tensorType!.shape[3].fixedValue!
        var mask = [Float](repeating: 0, count: s * cols)
        mask[cols - 1] = -.infinity  // row 0 does not see the last live row
        return (["q": Tensor(.fp32, shape: [1, h, s, d], floats: g.array(h * s * d)),
                 "live": Tensor(.int32, shape: [1], ints: [5]),
                 "mask": Tensor(.fp32, shape: [1, 1, s, cols], floats: mask)], states)
    }

    /// A fused step that runs its original ops on every call (the `tile` modulo chain) gives
    /// their intermediate buffers back to the plan's pool: after the warm-up calls no kernel
    /// output is allocated (before, each call allocated them again), and the results stay the
    /// unfused plan's.
    func testFallbackGivesItsBuffersBack() throws {
        let f = build(.tileModulo)
        let (plain, _) = try run(f, observing: .all)
        let plan = try ExecutionPlan(function: f, observing: .none)
        plan.pool.tracking = true
        for call in 0..<4 {
            let (inputs, states) = try feeds(f)
            plan.pool.resetStats()
            let out = try plan.run(inputs: inputs, states: states)
            XCTAssertEqual(try XCTUnwrap(out["o"]).floats, plain, "call \(call)")
            plan.recycle(out)
            if call >= 2 {
                XCTAssertEqual(plan.pool.stats.misses, 0, "call \(call): new buffers for \(plan.pool.stats.missesByOp)")
            }
        }
        let site = try XCTUnwrap(plan.fusionSites.first { $0.kind == "scaled_dot_product_attention" })
        XCTAssertEqual(site.fallbacks.values.reduce(0, +), 4)
    }

    func testChainsFuseOrFallBackToTheGraph() throws {
        for chain in [Chain.stackedRepeatKV, .repeatInterleave, .tileModulo] {
            let f = build(chain)
            let (fused, plan) = try run(f, observing: .none)
            let (plain, _) = try run(f, observing: .all)
            let site = try XCTUnwrap(plan.fusionSites.first { $0.kind == "scaled_dot_product_attention" }, "\(chain)")
            XCTAssertNil(site.reason, "\(chain)")
            let err = zip(fused, plain).map { abs($0 - $1) }.max() ?? .nan
            if chain == .tileModulo {
                XCTAssertEqual(site.fusedCalls, 0)
                XCTAssertEqual(site.fallbacks.values.reduce(0, +), 1)
                XCTAssertTrue(site.fallbacks.keys.contains { $0.contains("h / rep") }, "\(site.fallbacks)")
                XCTAssertEqual(fused, plain, "the fallback runs the graph's own ops")
            } else {
                XCTAssertEqual(site.fusedCalls, 1, "\(chain): \(site.fallbacks)")
                XCTAssertLessThanOrEqual(err, 1e-5, "\(chain)")
            }
            XCTAssertTrue(plan.fusionReport().contains("scaled_dot_product_attention"))
        }
    }
}
