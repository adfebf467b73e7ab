import GraphIR
@testable import Interpreter
import TestSupport
import XCTest

/// The explicit-cache fusion (`CarriedCacheFusion`) on the other ways an exporter writes
/// "layer l of the cache input, updated, stacked back": the layer picked by `gather` (a scalar
/// index, or `[l]` keeping the axis), the rows written by `scatter` or `slice_update`, the
/// layers merged by `stack` or `concat`. Each form, carried in place, gives the attention
/// outputs of the unfused graph (the cache fed back as an input tensor) bit for bit over
/// several calls, and its carried buffer holds the unfused graph's output cache. So does the
/// chained form (the input updated layer after layer, each attention slicing its layer out).
final class CarriedCacheFusionFormsTests: XCTestCase {
    struct Form {
        var keepAxis: Bool        // gather indices [l] + concat (else scalar l + stack)
        var sliceUpdate: Bool     // slice_update at begin / end (else scatter at idx)
        /// The cache updated on the input itself, layer after layer (`slice_update(w_{l−1},
        /// begin = [l, 0, 0, pos, 0])`), each attention slicing its layer out of the result.
        var chained = false
        /// `scatter_nd(pick, indices = (0, h, pos), updates)` (keepAxis false) instead of `scatter`.
        var scatterND = false
    }
    static let layers = 2, kv = 2, h = 4, ctx = 8, d = 4

    func build(_ form: Form) -> Function {
        let (L, kv, h, ctx, d) = (Self.layers, Self.kv, Self.h, Self.ctx, Self.d)
        let b = ProgramBuilder(opset: "CoreML7")
        let cacheShape = [L, 1, kv, ctx, d]
        let pickShape = form.keepAxis ? [1, 1, kv, ctx, d] : [1, kv, ctx, d]
        let rows = form.keepAxis ? [1, 1, kv, 1, d] : [1, kv, 1, d]
        let q = b.input("q", .tensor(.fp32, [1, h, 1, d]))
        let kIn = b.input("k_new", .tensor(.fp32, rows)), vIn = b.input("v_new", .tensor(.fp32, rows))
        let idx = b.input("idx", .tensor(.int32, [1]))
        let begin = b.input("begin", .tensor(.int32, [pickShape.count])), end = b.input("end", .tensor(.int32, [pickShape.count]))
        let mask = b.input("mask", .tensor(.fp32, [1, 1, 1, ctx]))
        let idxND = form.scatterND ? b.input("idx_nd", .tensor(.int32, [1, kv, 1, 3])) : nil
        let kc = b.input("k_cache", .tensor(.fp16, cacheShape)), vc = b.input("v_cache", .tensor(.fp16, cacheShape))
        let third = b.const("third", floats: [1.0 / 3.0], shape: [])
        let f = b.const("f", bools: [false], shape: []), t = b.const("t", bools: [true], shape: [])
        let zero = b.const("axis0", ints: [0], shape: [])
        /// repeat_kv: [1, KV, CTX, D] → [1, H, CTX, D] through expand_dims → tile → reshape.
        func repeatKV(_ x: Value, _ name: String) -> Value {
            let axes = b.const("\(name)_axes", ints: [2], shape: [1])
            let e = b.apply("expand_dims", ["x": x, "axes": axes], .tensor(.fp16, [1, kv, 1, ctx, d]))
            let reps = b.const("\(name)_reps", ints: [1, 1, Int32(h / kv), 1, 1], shape: [5])
            let tl = b.apply("tile", ["x": e, "reps": reps], .tensor(.fp16, [1, kv, h / kv, ctx, d]))
            let shape = b.const("\(name)_shape", ints: [1, Int32(h), Int32(ctx), Int32(d)], shape: [4])
            return b.apply("reshape", ["x": tl, "shape": shape], .tensor(.fp16, [1, h, ctx, d]))
        }
        /// softmax(q · Kᵀ + mask) · V for layer `l` (`kv2`: the repeated K and V).
        func attention(_ kv2: [Value], layer l: Int) -> Value {
            let scores = b.apply("matmul", ["x": q, "y": kv2[0], "transpose_x": f, "transpose_y": t], .tensor(.fp32, [1, h, 1, ctx]))
            let masked = b.apply("add", ["x": scores, "y": mask], .tensor(.fp32, [1, h, 1, ctx]))
            let axis = b.const("sm\(l)", ints: [-1], shape: [])
            let p = b.apply("softmax", ["x": masked, "axis": axis], .tensor(.fp32, [1, h, 1, ctx]))
            return b.apply("matmul", ["x": p, "y": kv2[1], "transpose_x": f, "transpose_y": f], .tensor(.fp32, [1, h, 1, d]), name: "o\(l)")
        }
        var outputs: [Value] = []
        var written: [[Value]] = [[], []]
        var current = [kc, vc]
        for l in 0..<L where form.chained {
            var kv2: [Value] = []
            let layer = b.const("layer\(l)", ints: [Int32(l), 0, 0, 0, 0], shape: [5])
            let lb = b.apply("add", ["x": begin, "y": layer], .tensor(.int32, [5])), le = b.apply("add", ["x": end, "y": layer], .tensor(.int32, [5]))
            for (c, new) in [kIn, vIn].enumerated() {
                let name = "\(c == 0 ? "k" : "v")\(l)"
                let u = b.apply("mul", ["x": new, "y": third], .tensor(.fp16, rows), name: "\(name)_rows")
                let wName = l == L - 1 ? (c == 0 ? "k_out" : "v_out") : "\(name)_w"
                current[c] = b.apply("slice_update", ["x": current[c], "update": u, "begin": lb, "end": le], .tensor(.fp16, cacheShape), name: wName)
                let sb = b.const("\(name)_b", ints: [Int32(l), 0, 0, 0, 0], shape: [5])
                let se = b.const("\(name)_e", ints: [Int32(l + 1), 1, Int32(kv), Int32(ctx), Int32(d)], shape: [5])
                let sq = b.const("\(name)_sq", bools: [true, false, false, false, false], shape: [5])
                let x = b.apply("slice_by_index", ["x": current[c], "begin": sb, "end": se, "squeeze_mask": sq], .tensor(.fp16, [1, kv, ctx, d]))
                kv2.append(repeatKV(x, name))
            }
            outputs.append(attention(kv2, layer: l))
        }
        if form.chained { return b.function(outputs: outputs + current) }
        for l in 0..<L {
            var kv2: [Value] = []
            for (c, (cache, new)) in [(kc, kIn), (vc, vIn)].enumerated() {
                let name = "\(c == 0 ? "k" : "v")\(l)"
                let index = form.keepAxis ? b.const("\(name)_i", ints: [Int32(l)], shape: [1]) : b.const("\(name)_i", ints: [Int32(l)], shape: [])
                let pick = b.apply("gather", ["x": cache, "indices": index, "axis": zero], .tensor(.fp16, pickShape), name: "\(name)_pick")
                // The new rows are computed (fp32 intermediates: not fp16 values).
                let u = b.apply("mul", ["x": new, "y": third], .tensor(.fp16, rows), name: "\(name)_rows")
                let w: Value
                if form.sliceUpdate {
                    w = b.apply("slice_update", ["x": pick, "update": u, "begin": begin, "end": end], .tensor(.fp16, pickShape), name: "\(name)_w")
                } else if let idxND {
                    let mode = b.const("\(name)_mode", .string("update"))
                    w = b.apply("scatter_nd", ["data": pick, "indices": idxND, "updates": u, "mode": mode], .tensor(.fp16, pickShape), name: "\(name)_w")
                } else {
                    let axis = b.const("\(name)_axis", ints: [Int32(pickShape.count - 2)], shape: [])
                    let mode = b.const("\(name)_mode", .string("update"))
                    w = b.apply("scatter", ["data": pick, "indices": idx, "updates": u, "axis": axis, "mode": mode], .tensor(.fp16, pickShape), name: "\(name)_w")
                }
                written[c].append(w)
                var x = w
                if form.keepAxis {
                    let s = b.const("\(name)_sq", ints: [1, Int32(kv), Int32(ctx), Int32(d)], shape: [4])
                    x = b.apply("reshape", ["x": w, "shape": s], .tensor(.fp16, [1, kv, ctx, d]))
                }
                kv2.append(repeatKV(x, name))
            }
            outputs.append(attention(kv2, layer: l))
        }
        for (c, ws) in written.enumerated() {
            let name = c == 0 ? "k_out" : "v_out"
            let type = MILType.tensor(.fp16, cacheShape)
            outputs.append(form.keepAxis ? b.apply("concat", ["axis": zero], type, name: name, variadic: ["values": ws])
                                         : b.apply("stack", ["axis": zero], type, name: name, variadic: ["values": ws]))
        }
        return b.function(outputs: outputs)
    }

    func testEveryFormGivesTheUnfusedResults() throws {
        for form in [Form(keepAxis: true, sliceUpdate: true), Form(keepAxis: false, sliceUpdate: false),
                     Form(keepAxis: true, sliceUpdate: false), Form(keepAxis: false, sliceUpdate: true),
                     Form(keepAxis: true, sliceUpdate: true, chained: true), Form(keepAxis: false, sliceUpdate: false, scatterND: true)] {
            let label = "\(form)"
            let fn = build(form)
            let pairs = ["k_cache": "k_out", "v_cache": "v_out"]
            let fused = try ExecutionPlan(function: fn, carrying: pairs)
            XCTAssertEqual(fused.carried, pairs, "\(label): \(fused.fusionReport())")
            XCTAssertEqual(fused.fusions["state_write"], 4, label)
            let plain = try ExecutionPlan(function: fn)
            XCTAssertEqual(plain.carried, [:])
            let shape = [Self.layers, 1, Self.kv, Self.ctx, Self.d]
            let buffers = try ["k_cache", "v_cache"].map { try StateBuffer(name: $0, type: TensorType(.fp32, fixed: shape)) }
            var caches = ["k_cache": Tensor.zeros(.fp16, shape: shape), "v_cache": Tensor.zeros(.fp16, shape: shape)]
            var rng = SplitMix64(seed: 7)
            let rank = form.keepAxis ? 5 : 4
            for pos in 0..<5 {
                let rows = form.keepAxis ? [1, 1, Self.kv, 1, Self.d] : [1, Self.kv, 1, Self.d]
                func random(_ s: [Int]) -> Tensor { Tensor(.fp32, shape: s, floats: (0..<s.reduce(1, *)).map { _ in Float.random(in: -2..<2, using: &rng) }) }
                var begin = [Int32](repeating: 0, count: rank), end = [Int32](repeating: 0, count: rank)
                for a in 0..<rank { end[a] = Int32((form.keepAxis ? [1, 1, Self.kv, Self.ctx, Self.d] : [1, Self.kv, Self.ctx, Self.d])[a]) }
                begin[rank - 2] = Int32(pos)
                end[rank - 2] = Int32(pos + 1)
                var inputs: [String: Tensor] = [
                    "q": random([1, Self.h, 1, Self.d]), "k_new": random(rows), "v_new": random(rows),
                    "idx": Tensor(.int32, shape: [1], ints: [Int32(pos)]),
                    "begin": Tensor(.int32, shape: [rank], ints: begin), "end": Tensor(.int32, shape: [rank], ints: end),
                    "mask": Tensor(.fp32, shape: [1, 1, 1, Self.ctx], floats: (0..<Self.ctx).map { $0 <= pos ? 0 : -1e4 }),
                ]
                if form.scatterND {
                    inputs["idx_nd"] = Tensor(.int32, shape: [1, Self.kv, 1, 3], ints: (0..<Self.kv).flatMap { [0, Int32($0), Int32(pos)] })
                }
                let a = try fused.run(inputs: inputs, states: ["k_cache": buffers[0], "v_cache": buffers[1]])
                XCTAssertNil(a["k_out"], label)
                let b = try plain.run(inputs: inputs.merging(caches) { x, _ in x })
                for o in ["o0", "o1"] { XCTAssertEqual(a[o]?.floats, b[o]?.floats, "\(label) call \(pos) \(o)") }
                caches = ["k_cache": try XCTUnwrap(b["k_out"]), "v_cache": try XCTUnwrap(b["v_out"])]
                XCTAssertEqual(buffers[0].tensor().floats, caches["k_cache"]?.floats, "\(label) call \(pos): carried K = the output cache")
                XCTAssertEqual(buffers[1].tensor().floats, caches["v_cache"]?.floats, "\(label) call \(pos): carried V = the output cache")
            }
            for s in fused.fusionSites where s.kind == "state_write" || s.kind == "carried_cache" || s.kind == "attention" {
                XCTAssertNil(s.reason, "\(label) \(s.op)")
                XCTAssertEqual(s.fallbacks, [:], "\(label) \(s.op)")
                XCTAssertEqual(s.fusedCalls, 5, "\(label) \(s.op)")
            }
        }
    }

    /// The merge takes the layers out of order (`stack(w_1, w_0)`): no in-place form exists;
    /// reported and not fused.
    func testLayersOutOfOrderAreNotFused() throws {
        let fn = build(Form(keepAxis: false, sliceUpdate: false))
        let stack = try XCTUnwrap(fn.body.operations.first { $0.outputs.first?.name == "k_out" })
        let i = try XCTUnwrap(stack.inputs.firstIndex { $0.name == "values" })
        stack.inputs[i].operands.reverse()
        let plan = try ExecutionPlan(function: fn, carrying: ["k_cache": "k_out", "v_cache": "v_out"])
        XCTAssertEqual(plan.carried, ["v_cache": "v_out"])
        let site = try XCTUnwrap(plan.fusionSites.first { $0.kind == "carried_cache" && $0.op == "k_cache" })
        XCTAssertEqual(site.reason, "the gather of layer 0 has no constant index 0")
    }
}
