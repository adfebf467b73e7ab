import Foundation
import GraphIR
@testable import Interpreter
import TestSupport
import XCTest

/// An encoder's attention as coremltools converts a Hugging Face BERT: K and V come from
/// `linear` → `reshape [1, S, H, D]` → `transpose` (the key with the negative perm
/// `[0, 2, -1, -3]`), so their rows are not D-contiguous. The fused step packs them once and
/// runs the fused attention; the outputs stay within 1e-5 of torch (the recorded
/// `hf_bert_encoder_torch.npz`, built by `tools/make_foreign_fixtures.py`).
final class EncoderAttentionTests: XCTestCase {
    func testExportersBertAttentionFusesAndMatchesTorch() throws {
        let model = try ModelLoader.load(path: Fixtures.path("foreign/hf_bert_encoder.mlpackage"))
        let ref = try NPZ.read(path: Fixtures.path("foreign/hf_bert_encoder_torch.npz"))
        let plan = try ExecutionPlan(function: try XCTUnwrap(model.program.function(named: "main")))
        let out = try plan.run(inputs: ["input_ids": try XCTUnwrap(ref["input_ids"]),
                                        "attention_mask": try XCTUnwrap(ref["attention_mask"])])
        let sites = plan.fusionSites.filter { $0.kind == "attention" }
        XCTAssertEqual(sites.count, 2)
        for s in sites {
            XCTAssertNil(s.reason, s.op)
            XCTAssertEqual(s.fusedCalls, 1, "\(s.op): \(s.fallbacks)")
            XCTAssertEqual(s.fallbacks, [:], s.op)
        }
        let got = try XCTUnwrap(out["last_hidden_state"]), want = try XCTUnwrap(ref["last_hidden_state"])
        XCTAssertEqual(got.shape, want.shape)
        let diff = zip(got.floats, want.floats).map { abs($0 - $1) }.max() ?? .infinity
        XCTAssertLessThan(diff, 1e-5)
    }

    /// `transpose` with perm entries counted from the end reads as the kernel does; the packed
    /// view is the transposed array element by element (index arithmetic, not the view code).
    func testNegativePermViewGathersTheTransposedArray() throws {
        let shape = [1, 3, 2, 4]  // [1, S, H, D]
        let src = (0..<24).map(Float.init)
        var view = LayoutView(shape: shape)
        try view.transpose([0, 2, -1, -3])  // → [1, H, D, S]
        XCTAssertEqual(view.shape, [1, 2, 4, 3])
        let got = try view.gather(.tensor(Tensor(.fp32, shape: shape, floats: src)))
        var want: [Float] = []
        for h in 0..<2 { for d in 0..<4 { for s in 0..<3 { want.append(src[(s * 2 + h) * 4 + d]) } } }
        XCTAssertEqual(got, want)
        XCTAssertThrowsError(try view.transpose([0, 1, 2, -5]))
    }

    /// A mask that does not broadcast against the scores ([1, 4] for 5 tokens): the fused step
    /// runs the original ops, and the error names the op that fails (the mask `add`) as the
    /// op-by-op plan (`observing: .all`, no fusion) names it — not the fused step's last op
    /// (it said `op 'context_layer_1' (matmul)`).
    func testMaskThatDoesNotBroadcastNamesTheFailingOp() throws {
        let model = try ModelLoader.load(path: Fixtures.path("foreign/hf_bert_encoder.mlpackage"))
        let f = try XCTUnwrap(model.program.function(named: "main"))
        let inputs = ["input_ids": Tensor(.int32, shape: [1, 5], ints: [1, 2, 3, 4, 5]),
                      "attention_mask": Tensor(.int32, shape: [1, 4], ints: [1, 1, 1, 1])]
        func message(_ plan: ExecutionPlan) -> String {
            do { _ = try plan.run(inputs: inputs); return "no error" } catch { return "\(error)" }
        }
        let plain = message(try ExecutionPlan(function: f, observing: .all))
        XCTAssertTrue(plain.contains("(add): shapes"), plain)
        let fused = try ExecutionPlan(function: f)
        XCTAssertEqual(fused.fusionSites.filter { $0.kind == "attention" && $0.reason == nil }.count, 2)
        XCTAssertEqual(message(fused), plain)
    }
    /// A query longer than the packed-K / V limit (24 > 16 rows) over K / V read in place from
    /// `[1, S, H·D]` (coremltools' BERT chain: `reshape` → `transpose`, the key's perm negative)
    /// runs the blocked route (per head Q·Kᵀ, scale, mask, softmax, ·V) fused on every call,
    /// at every SIMD level, within 1e-5 of a scalar Double reference of the graph's semantics.
    func testLongQueryOverStridedKVRunsBlockedAndMatchesReference() throws {
        let (s, h, d) = (24, 3, 8)
        let e = h * d
        let scale: Float = 0.35
        let b = ProgramBuilder()
        let ql = b.input("q", .tensor(.fp32, [1, s, e])), kl = b.input("k", .tensor(.fp32, [1, s, e]))
        let vl = b.input("v", .tensor(.fp32, [1, s, e])), mask = b.input("mask", .tensor(.fp32, [1, 1, 1, s]))
        func split(_ x: Value, _ n: String, _ perm: [Int32], _ shape: [Int]) -> Value {
            let r = b.apply("reshape", ["x": x, "shape": b.const("\(n)_shape", ints: [1, Int32(s), Int32(h), Int32(d)], shape: [4])],
                            .tensor(.fp32, [1, s, h, d]))
            return b.apply("transpose", ["x": r, "perm": b.const("\(n)_perm", ints: perm, shape: [4])], .tensor(.fp32, shape))
        }
        let q = split(ql, "q", [0, 2, 1, 3], [1, h, s, d]), kt = split(kl, "k", [0, 2, -1, -3], [1, h, d, s])
        let v = split(vl, "v", [0, 2, 1, 3], [1, h, s, d])
        let f = b.const("f", bools: [false], shape: [])
        let sc = b.apply("matmul", ["x": q, "y": kt, "transpose_x": f, "transpose_y": f], .tensor(.fp32, [1, h, s, s]))
        let scaled = b.apply("mul", ["x": sc, "y": b.const("scale", floats: [scale], shape: [])], .tensor(.fp32, [1, h, s, s]))
        let masked = b.apply("add", ["x": scaled, "y": mask], .tensor(.fp32, [1, h, s, s]))
        let p = b.apply("softmax", ["x": masked, "axis": b.const("axis", ints: [-1], shape: [])], .tensor(.fp32, [1, h, s, s]))
        let o = b.apply("matmul", ["x": p, "y": v, "transpose_x": f, "transpose_y": f], .tensor(.fp32, [1, h, s, d]), name: "o")
        let fn = b.function(outputs: [o])

        var g = KVCacheFusionTests.Rand(state: 11)
        let (qf, kf, vf) = (g.array(s * e), g.array(s * e), g.array(s * e))
        var mf = [Float](repeating: 0, count: s)
        for j in [3, 17, 23] { mf[j] = -10000 }
        // The reference: scores in Double from the fp32 inputs, each head over [S, H, D].
        var want = [Float](repeating: 0, count: h * s * d)
        for hh in 0..<h {
            for i in 0..<s {
                var w = (0..<s).map { j -> Double in
                    var acc = 0.0
                    for t in 0..<d { acc += Double(qf[i * e + hh * d + t]) * Double(kf[j * e + hh * d + t]) }
                    return acc * Double(scale) + Double(mf[j])
                }
                let mx = w.max()!
                w = w.map { Foundation.exp($0 - mx) }
                let sum = w.reduce(0, +)
                for t in 0..<d {
                    var acc = 0.0
                    for j in 0..<s { acc += w[j] / sum * Double(vf[j * e + hh * d + t]) }
                    want[(hh * s + i) * d + t] = Float(acc)
                }
            }
        }
        let inputs = ["q": Tensor(.fp32, shape: [1, s, e], floats: qf), "k": Tensor(.fp32, shape: [1, s, e], floats: kf),
                      "v": Tensor(.fp32, shape: [1, s, e], floats: vf), "mask": Tensor(.fp32, shape: [1, 1, 1, s], floats: mf)]
        defer { GEMM.simdLevel = -1 }
        for level in 0...2 {
            GEMM.simdLevel = level
            let plan = try ExecutionPlan(function: fn)
            let got = try XCTUnwrap(try plan.run(inputs: inputs)["o"]).floats
            let site = try XCTUnwrap(plan.fusionSites.first { $0.kind == "attention" })
            XCTAssertNil(site.reason)
            XCTAssertEqual(site.fusedCalls, 1, "level \(level): \(site.fallbacks)")
            XCTAssertEqual(got.count, want.count)
            let diff = zip(got, want).map { abs($0 - $1) }.max() ?? .infinity
            XCTAssertLessThan(diff, 1e-5, "level \(level)")
        }
    }

    /// No key column (K / V of 0 rows): softmax over an empty axis, then an empty product, gives
    /// zeros in the unfused graph (and in torch's scaled_dot_product_attention); the fused
    /// attention gave NaN, through the per-row kernel (a 2-row query) and the blocked route (a
    /// 20-row query over K / V transposed from [1, T, H, D]) alike.
    func testEmptyKeyGivesTheUnfusedGraphsZeros() throws {
        for (s, strided) in [(2, false), (20, true)] {
            let (h, d) = (2, 4)
            let b = ProgramBuilder()
            let q = b.input("q", .tensor(.fp32, [1, h, s, d]))
            var k: Value, v: Value
            if strided {
                let kl = b.input("k", .tensor(.fp32, [1, 0, h, d])), vl = b.input("v", .tensor(.fp32, [1, 0, h, d]))
                k = b.apply("transpose", ["x": kl, "perm": b.const("kp", ints: [0, 2, 1, 3], shape: [4])], .tensor(.fp32, [1, h, 0, d]))
                v = b.apply("transpose", ["x": vl, "perm": b.const("vp", ints: [0, 2, 1, 3], shape: [4])], .tensor(.fp32, [1, h, 0, d]))
            } else {
                k = b.input("k", .tensor(.fp32, [1, h, 0, d]))
                v = b.input("v", .tensor(.fp32, [1, h, 0, d]))
            }
            let o = b.apply("scaled_dot_product_attention", ["query": q, "key": k, "value": v], .tensor(.fp32, [1, h, s, d]), name: "o")
            let fn = b.function(outputs: [o])
            let kv = Tensor(.fp32, shape: strided ? [1, 0, h, d] : [1, h, 0, d], floats: [])
            let inputs = ["q": Tensor(.fp32, shape: [1, h, s, d], floats: (0..<(h * s * d)).map { Float($0) * 0.1 }), "k": kv, "v": kv]
            let want = try XCTUnwrap(try ExecutionPlan(function: fn, observing: .all).run(inputs: inputs)["o"]).floats
            let plan = try ExecutionPlan(function: fn)
            let got = try XCTUnwrap(try plan.run(inputs: inputs)["o"]).floats
            XCTAssertEqual(want, [Float](repeating: 0, count: h * s * d), "s \(s): the unfused graph")
            XCTAssertEqual(got, want, "s \(s) strided \(strided): fused vs unfused")
            XCTAssertEqual(plan.fusionSites.first?.fusedCalls, 1, "s \(s): \(plan.fusionSites.first?.fallbacks ?? [:])")
        }
    }
}
