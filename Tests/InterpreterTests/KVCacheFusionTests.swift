import GraphIR
@testable import Interpreter
import TestSupport
import XCTest

/// The execution fusions of a KV-cache layer built like the LLM graphs (scatter / slice_update
/// into `state<tensor<fp16 | fp32, …>>`, then `read_state` → expand_dims → tile → reshape →
/// attention): the fused forms give the same bits as the unfused ones, read the state in place,
/// and keep the order of state reads and writes.
final class KVCacheFusionTests: XCTestCase {
    struct Layer {
        var dtype: DType = .fp16
        var h = 6, kv = 2, s = 3, d = 16, ctx = 12
        /// The K / V `read_state` results are also function outputs (no read_state look-through).
        var exposeReads = false
        /// The `read_state` feeding the scatter is also an output (no fused KV write).
        var exposeScatterInput = false
        /// The scale is a function input (no attention fusion at all).
        var scaleInput = false
        /// `write_state(k_cache, zeros)` between the K read and the attention.
        var writeBetween = false
        /// slice_update at [cache_offset] instead of scatter at `idx`.
        var sliceUpdate = false
        /// `coreml_update_state(state, value)` (its result read by the attention) instead of
        /// `write_state` + `read_state`.
        var updateState = false
        /// `scatter_nd(data, indices [1, KV, S, 3] = (0, h, pos + r), updates)` instead of `scatter`.
        var scatterND = false
        /// K / V read through `slice_by_index(begin = [0, 0, window_begin, 0], end = …)` of
        /// `window` rows, a window that moves from call to call (runtime `begin` / `end` inputs).
        var window: Int?
        var rep: Int { h / kv }
        /// Key columns the attention sees.
        var columns: Int { window ?? ctx }
    }

    func build(_ l: Layer) -> Function {
        let b = ProgramBuilder()
        let cache: MILType = .tensor(l.dtype, [1, l.kv, l.ctx, l.d])
        let q = b.input("q", .tensor(.fp32, [1, l.h, l.s, l.d]))
        let kNew = b.input("k_new", .tensor(.fp32, [1, l.kv, l.s, l.d]))
        let vNew = b.input("v_new", .tensor(.fp32, [1, l.kv, l.s, l.d]))
        let idx = b.input("idx", .tensor(.int32, [l.s]))
        let begin = b.input("begin", .tensor(.int32, [4]))
        let end = b.input("end", .tensor(.int32, [4]))
        let mask = b.input("mask", .tensor(.fp32, [1, 1, l.s, l.columns]))
        let wBegin = l.window != nil ? b.input("window_begin", .tensor(.int32, [4])) : nil
        let wEnd = l.window != nil ? b.input("window_end", .tensor(.int32, [4])) : nil
        let idxND = l.scatterND ? b.input("idx_nd", .tensor(.int32, [1, l.kv, l.s, 3])) : nil
        let scaleIn = l.scaleInput ? b.input("scale", .tensor(.fp32, [])) : nil
        let kc = b.input("k_cache", .state(cache)), vc = b.input("v_cache", .state(cache))
        var outputs: [Value] = []
        func update(_ state: Value, _ rows: Value, _ name: String) -> Value {
            let r = b.apply("read_state", ["input": state], cache, name: "\(name)_read0")
            if l.exposeScatterInput { outputs.append(r) }
            let u: Value
            if l.sliceUpdate {
                u = b.apply("slice_update", ["x": r, "update": rows, "begin": begin, "end": end], cache, name: "\(name)_upd")
            } else if let idxND {
                let mode = b.const("\(name)_mode", .string("update"))
                u = b.apply("scatter_nd", ["data": r, "indices": idxND, "updates": rows, "mode": mode], cache, name: "\(name)_upd")
            } else {
                let axis = b.const("\(name)_axis", ints: [2], shape: [])
                let mode = b.const("\(name)_mode", .string("update"))
                u = b.apply("scatter", ["data": r, "indices": idx, "updates": rows, "axis": axis, "mode": mode], cache, name: "\(name)_upd")
            }
            if l.updateState { return b.apply("coreml_update_state", ["state": state, "value": u], cache, name: "\(name)_update") }
            b.op("write_state", ["input": state, "data": u], nil, name: "\(name)_write")
            return b.apply("read_state", ["input": state], cache, name: "\(name)_read1")
        }
        func repeated(_ full: Value, _ name: String) -> Value {
            let c = l.columns
            var x = full
            if let wBegin, let wEnd {
                x = b.apply("slice_by_index", ["x": full, "begin": wBegin, "end": wEnd], .tensor(l.dtype, [1, l.kv, c, l.d]), name: "\(name)_window")
            }
            let axes = b.const("\(name)_axes", ints: [2], shape: [1])
            let e = b.apply("expand_dims", ["x": x, "axes": axes], .tensor(l.dtype, [1, l.kv, 1, c, l.d]))
            let reps = b.const("\(name)_reps", ints: [1, 1, Int32(l.rep), 1, 1], shape: [5])
            let t = b.apply("tile", ["x": e, "reps": reps], .tensor(l.dtype, [1, l.kv, l.rep, c, l.d]))
            let shape = b.const("\(name)_shape", ints: [1, Int32(l.h), Int32(c), Int32(l.d)], shape: [4])
            return b.apply("reshape", ["x": t, "shape": shape], .tensor(l.dtype, [1, l.h, c, l.d]))
        }
        let k = update(kc, kNew, "k"), v = update(vc, vNew, "v")
        if l.exposeReads { outputs += [k, v] }
        if l.writeBetween {
            let zeros = b.const("zeros", floats: [Float](repeating: 0, count: l.kv * l.ctx * l.d), shape: [1, l.kv, l.ctx, l.d])
            b.op("write_state", ["input": kc, "data": zeros], nil, name: "k_zero")
        }
        let kt = repeated(k, "k"), vt = repeated(v, "v")
        let f = b.const("f", bools: [false], shape: []), t = b.const("t", bools: [true], shape: [])
        let scores = b.apply("matmul", ["x": q, "y": kt, "transpose_x": f, "transpose_y": t], .tensor(.fp32, [1, l.h, l.s, l.columns]))
        let scale = scaleIn ?? b.const("scale", floats: [0.25], shape: [])
        let scaled = b.apply("mul", ["x": scores, "y": scale], .tensor(.fp32, [1, l.h, l.s, l.columns]))
        let masked = b.apply("add", ["x": scaled, "y": mask], .tensor(.fp32, [1, l.h, l.s, l.columns]))
        let axis = b.const("sm_axis", ints: [-1], shape: [])
        let p = b.apply("softmax", ["x": masked, "axis": axis], .tensor(.fp32, [1, l.h, l.s, l.columns]))
        let o = b.apply("matmul", ["x": p, "y": vt, "transpose_x": f, "transpose_y": f], .tensor(.fp32, [1, l.h, l.s, l.d]), name: "o")
        return b.function(outputs: [o] + outputs)
    }

    struct Rand {
        var state: UInt64
        mutating func array(_ n: Int) -> [Float] {
            (0..<n).map { _ in
                state = state &* 6364136223846793005 &+ 1442695040888963407
                return Float(Int64(bitPattern: state >> 11) % 2_000_001 - 1_000_000) / 700_000
            }
        }
    }

    /// Three calls (prefill of S rows at 0, then S more, then S more): outputs and final states.
    func run(_ l: Layer) throws -> (outs: [[Float]], states: [String: [Float]], plan: ExecutionPlan) {
        let f = build(l)
        let plan = try ExecutionPlan(function: f)
        var states: [String: StateBuffer] = [:]
        for v in f.stateInputs { states[v.name] = try StateBuffer(name: v.name, type: v.type.stateWrappedTensor!) }
        var g = Rand(state: 11)
        var outs: [[Float]] = []
        for call in 0..<3 {
            let pos = call * l.s
            // A moving window sees rows w0 ..< w0 + window of the cache, every one of them.
            let w0 = l.window.map { min(call * 2, l.ctx - $0) } ?? 0
            let cols = l.columns
            var mask = [Float](repeating: l.window != nil ? 0 : -1e4, count: l.s * cols)
            if l.window == nil { for r in 0..<l.s { for c in 0...(pos + r) { mask[r * cols + c] = 0 } } }
            var inputs: [String: Tensor] = [
                "q": Tensor(.fp32, shape: [1, l.h, l.s, l.d], floats: g.array(l.h * l.s * l.d)),
                "k_new": Tensor(.fp32, shape: [1, l.kv, l.s, l.d], floats: g.array(l.kv * l.s * l.d)),
                "v_new": Tensor(.fp32, shape: [1, l.kv, l.s, l.d], floats: g.array(l.kv * l.s * l.d)),
                "idx": Tensor(.int32, shape: [l.s], ints: (0..<l.s).map { Int32(pos + $0) }),
                "begin": Tensor(.int32, shape: [4], ints: [0, 0, Int32(pos), 0]),
                "end": Tensor(.int32, shape: [4], ints: [1, Int32(l.kv), Int32(pos + l.s), Int32(l.d)]),
                "mask": Tensor(.fp32, shape: [1, 1, l.s, cols], floats: mask),
            ]
            if let w = l.window {
                inputs["window_begin"] = Tensor(.int32, shape: [4], ints: [0, 0, Int32(w0), 0])
                inputs["window_end"] = Tensor(.int32, shape: [4], ints: [1, Int32(l.kv), Int32(w0 + w), Int32(l.d)])
            }
            if l.scaleInput { inputs["scale"] = Tensor.scalar(0.25) }
            if l.scatterND {
                var nd: [Int32] = []
                for h in 0..<l.kv { for r in 0..<l.s { nd += [0, Int32(h), Int32(pos + r)] } }
                inputs["idx_nd"] = Tensor(.int32, shape: [1, l.kv, l.s, 3], ints: nd)
            }
            let out = try plan.run(inputs: inputs, states: states)
            outs.append(try XCTUnwrap(out["o"]).floats)
        }
        return (outs, states.mapValues { $0.tensor().floats }, plan)
    }

    func same(_ a: [Float], _ b: [Float]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { $0.bitPattern == $1.bitPattern }
    }

    func readStates(_ plan: ExecutionPlan) -> Int { plan.root.steps.filter { $0.op.type == "read_state" }.count }

    func testFusedFormsMatchUnfusedBitForBit() throws {
        for dtype in [DType.fp16, .fp32] {
            for (h, kv) in [(6, 2), (4, 4)] {
                for s in [1, 3] {
                    for slice in [false, true] {
                        var l = Layer()
                        (l.dtype, l.h, l.kv, l.s, l.sliceUpdate) = (dtype, h, kv, s, slice)
                        let label = "\(dtype) h \(h) kv \(kv) s \(s) \(slice ? "slice_update" : "scatter")"
                        let fused = try run(l)
                        XCTAssertEqual(fused.plan.fusions["attention"], 1, label)
                        XCTAssertEqual(fused.plan.fusions["state_write"], 2, label)
                        XCTAssertEqual(readStates(fused.plan), 0, "\(label): every read_state is fused away")

                        var noLook = l
                        noLook.exposeReads = true
                        let tensorPath = try run(noLook)
                        XCTAssertEqual(tensorPath.plan.fusions["attention"], 1, label)
                        XCTAssertEqual(readStates(tensorPath.plan), 2, label)
                        var unfusedWrite = l
                        unfusedWrite.exposeScatterInput = true
                        let denseWrite = try run(unfusedWrite)
                        XCTAssertNil(denseWrite.plan.fusions["state_write"], label)
                        for i in 0..<3 {
                            XCTAssertTrue(same(fused.outs[i], tensorPath.outs[i]), "\(label) call \(i): in-place read differs from the tensor path")
                            XCTAssertTrue(same(fused.outs[i], denseWrite.outs[i]), "\(label) call \(i): fused write differs from the dense write")
                        }
                        for (name, a) in fused.states {
                            XCTAssertTrue(same(a, tensorPath.states[name]!), "\(label) \(name)")
                            XCTAssertTrue(same(a, denseWrite.states[name]!), "\(label) \(name): fused KV write differs from write_state")
                        }

                        var noFusion = l
                        noFusion.scaleInput = true
                        let plain = try run(noFusion)
                        XCTAssertNil(plain.plan.fusions["attention"], label)
                        for i in 0..<3 {
                            let err = zip(fused.outs[i], plain.outs[i]).map { abs($0 - $1) }.max() ?? .nan
                            XCTAssertLessThanOrEqual(err, 1e-5, "\(label) call \(i): fused attention vs the op-by-op graph")
                        }
                    }
                }
            }
        }
    }

    /// A K / V read through a window that moves between calls (`slice_by_index` with runtime
    /// begin / end): the fused attention resolves each call's own view (its geometry is memoized
    /// by the parameters' values), the results of the op-by-op graph at every call.
    func testMovingWindowReadFollowsItsParameters() throws {
        for dtype in [DType.fp16, .fp32] {
            var l = Layer()
            (l.dtype, l.h, l.kv, l.s, l.window) = (dtype, 6, 2, 1, 7)
            let fused = try run(l)
            XCTAssertEqual(fused.plan.fusions["attention"], 1, "\(dtype)")
            var noFusion = l
            noFusion.scaleInput = true
            let plain = try run(noFusion)
            XCTAssertNil(plain.plan.fusions["attention"])
            for i in 0..<3 {
                let err = zip(fused.outs[i], plain.outs[i]).map { abs($0 - $1) }.max() ?? .nan
                XCTAssertLessThanOrEqual(err, 1e-5, "\(dtype) call \(i): fused attention over the moving window vs the op-by-op graph")
            }
        }
    }

    /// `coreml_update_state` (the raw form of a KV write whose result the attention reads):
    /// the write stores only its rows and the attention reads the state in place, bit-identical
    /// to the op-by-op write (its `read_state` an output too, so nothing is fused); with the
    /// updated value also an output it is returned as a copy, still bit-identical.
    func testCoreMLUpdateStateIsFused() throws {
        for dtype in [DType.fp16, .fp32] {
            for slice in [false, true] {
                var l = Layer()
                (l.dtype, l.sliceUpdate, l.updateState) = (dtype, slice, true)
                let label = "\(dtype) \(slice ? "slice_update" : "scatter")"
                let fused = try run(l)
                XCTAssertEqual(fused.plan.fusions["state_write"], 2, label)
                XCTAssertEqual(fused.plan.fusions["attention"], 1, label)
                XCTAssertEqual(readStates(fused.plan), 0, label)
                XCTAssertFalse(fused.plan.root.steps.contains { $0.op.type == "coreml_update_state" }, label)
                var dense = l
                dense.exposeScatterInput = true
                let reference = try run(dense)
                XCTAssertNil(reference.plan.fusions["state_write"], label)
                var copied = l
                copied.exposeReads = true
                let copy = try run(copied)
                XCTAssertEqual(copy.plan.fusions["state_write"], 2, label)
                for i in 0..<3 {
                    XCTAssertTrue(same(fused.outs[i], reference.outs[i]), "\(label) call \(i)")
                    XCTAssertTrue(same(copy.outs[i], reference.outs[i]), "\(label) call \(i): copied result")
                }
                for (name, a) in fused.states {
                    XCTAssertTrue(same(a, reference.states[name]!), "\(label) \(name)")
                    XCTAssertTrue(same(copy.states[name]!, reference.states[name]!), "\(label) \(name)")
                }
            }
        }
    }

    /// `scatter_nd(mode = update)` KV writes (into a state by `write_state`, or by
    /// `coreml_update_state`) store only their rows, bit-identical to the op-by-op write.
    func testScatterNDIsFused() throws {
        for dtype in [DType.fp16, .fp32] {
            for update in [false, true] {
                var l = Layer()
                (l.dtype, l.scatterND, l.updateState) = (dtype, true, update)
                let label = "\(dtype) \(update ? "coreml_update_state" : "write_state")"
                let fused = try run(l)
                XCTAssertEqual(fused.plan.fusions["state_write"], 2, label)
                XCTAssertFalse(fused.plan.root.steps.contains { $0.op.type == "write_state" || $0.op.type == "coreml_update_state" }, label)
                var dense = l
                dense.exposeScatterInput = true
                let reference = try run(dense)
                XCTAssertNil(reference.plan.fusions["state_write"], label)
                for i in 0..<3 { XCTAssertTrue(same(fused.outs[i], reference.outs[i]), "\(label) call \(i)") }
                for (name, a) in fused.states { XCTAssertTrue(same(a, reference.states[name]!), "\(label) \(name)") }
            }
        }
    }

    /// A write to the cache between its read and the attention keeps the `read_state` (the
    /// attention must see the values read before the write).
    func testWriteBetweenKeepsTheRead() throws {
        var l = Layer()
        l.writeBetween = true
        let between = try run(l)
        XCTAssertEqual(between.plan.fusions["attention"], 1)
        XCTAssertEqual(readStates(between.plan), 1, "K keeps its read_state, V is read in place")
        XCTAssertTrue(between.states["k_cache"]!.allSatisfy { $0 == 0 })
        // Call 0 sees the same cache as the layer without the extra write.
        let plain = try run(Layer())
        XCTAssertTrue(same(between.outs[0], plain.outs[0]))
    }

    /// fp16 precision keeps the unfused attention (per-op rounding) and still writes in place.
    func testFP16PrecisionKeepsReads() throws {
        let f = build(Layer())
        let plan = try ExecutionPlan(function: f, precision: .fp16)
        XCTAssertNil(plan.fusions["attention"])
        XCTAssertEqual(plan.fusions["state_write"], 2)
        XCTAssertEqual(readStates(plan), 2)
    }

    /// Attention over the cache as read *before* new rows are scattered into it, the write_state
    /// coming after the attention: the K read is looked through (the attention reads the state
    /// in place), so the scatter must not be fused into an in-place write at its own position,
    /// which would put the new rows in the cache before the attention reads it.
    func buildReadBeforeWrite(scaleInput: Bool, h: Int = 4, kv: Int = 2, s: Int = 2, d: Int = 16, ctx: Int = 8) -> Function {
        let b = ProgramBuilder()
        let cache: MILType = .tensor(.fp16, [1, kv, ctx, d])
        let q = b.input("q", .tensor(.fp32, [1, h, s, d]))
        let kNew = b.input("k_new", .tensor(.fp32, [1, kv, s, d]))
        let idx = b.input("idx", .tensor(.int32, [s]))
        let mask = b.input("mask", .tensor(.fp32, [1, 1, s, ctx]))
        let scaleIn = scaleInput ? b.input("scale", .tensor(.fp32, [])) : nil
        let kc = b.input("k_cache", .state(cache)), vc = b.input("v_cache", .state(cache))
        let rOld = b.apply("read_state", ["input": kc], cache, name: "k_old")
        let rW = b.apply("read_state", ["input": kc], cache, name: "k_for_write")
        let axis = b.const("axis", ints: [2], shape: [])
        let mode = b.const("mode", .string("update"))
        let u = b.apply("scatter", ["data": rW, "indices": idx, "updates": kNew, "axis": axis, "mode": mode], cache, name: "k_upd")
        let rv = b.apply("read_state", ["input": vc], cache, name: "v_read")
        let rep = h / kv
        func repeated(_ x: Value, _ name: String) -> Value {
            let axes = b.const("\(name)_axes", ints: [2], shape: [1])
            let e = b.apply("expand_dims", ["x": x, "axes": axes], .tensor(.fp16, [1, kv, 1, ctx, d]))
            let reps = b.const("\(name)_reps", ints: [1, 1, Int32(rep), 1, 1], shape: [5])
            let t = b.apply("tile", ["x": e, "reps": reps], .tensor(.fp16, [1, kv, rep, ctx, d]))
            let shape = b.const("\(name)_shape", ints: [1, Int32(h), Int32(ctx), Int32(d)], shape: [4])
            return b.apply("reshape", ["x": t, "shape": shape], .tensor(.fp16, [1, h, ctx, d]))
        }
        let kt = repeated(rOld, "k"), vt = repeated(rv, "v")
        let f = b.const("f", bools: [false], shape: []), t = b.const("t", bools: [true], shape: [])
        let scores = b.apply("matmul", ["x": q, "y": kt, "transpose_x": f, "transpose_y": t], .tensor(.fp32, [1, h, s, ctx]))
        let scale = scaleIn ?? b.const("scale", floats: [0.25], shape: [])
        let scaled = b.apply("mul", ["x": scores, "y": scale], .tensor(.fp32, [1, h, s, ctx]))
        let masked = b.apply("add", ["x": scaled, "y": mask], .tensor(.fp32, [1, h, s, ctx]))
        let smAxis = b.const("sm_axis", ints: [-1], shape: [])
        let p = b.apply("softmax", ["x": masked, "axis": smAxis], .tensor(.fp32, [1, h, s, ctx]))
        let o = b.apply("matmul", ["x": p, "y": vt, "transpose_x": f, "transpose_y": f], .tensor(.fp32, [1, h, s, d]), name: "o")
        b.op("write_state", ["input": kc, "data": u], nil, name: "k_write")
        return b.function(outputs: [o])
    }

    func testFusedWriteDoesNotOvertakeAnInPlaceRead() throws {
        let (h, kv, s, d, ctx) = (4, 2, 2, 16, 8)
        func run(_ scaleInput: Bool) throws -> ([[Float]], ExecutionPlan) {
            let fn = buildReadBeforeWrite(scaleInput: scaleInput)
            let plan = try ExecutionPlan(function: fn)
            var states: [String: StateBuffer] = [:]
            for v in fn.stateInputs { states[v.name] = try StateBuffer(name: v.name, type: v.type.stateWrappedTensor!) }
            try states["v_cache"]!.write(Tensor(.fp16, shape: [1, kv, ctx, d], floats: (0..<(kv * ctx * d)).map { Float($0 % 7) - 3 }))
            var g = Rand(state: 5)
            var outs: [[Float]] = []
            for call in 0..<3 {
                let pos = call * s
                var mask = [Float](repeating: -1e4, count: s * ctx)
                for r in 0..<s { for c in 0...(pos + r) { mask[r * ctx + c] = 0 } }
                var inputs: [String: Tensor] = [
                    "q": Tensor(.fp32, shape: [1, h, s, d], floats: g.array(h * s * d)),
                    "k_new": Tensor(.fp32, shape: [1, kv, s, d], floats: g.array(kv * s * d)),
                    "idx": Tensor(.int32, shape: [s], ints: (0..<s).map { Int32(pos + $0) }),
                    "mask": Tensor(.fp32, shape: [1, 1, s, ctx], floats: mask),
                ]
                if scaleInput { inputs["scale"] = Tensor.scalar(0.25) }
                outs.append(try XCTUnwrap(try plan.run(inputs: inputs, states: states)["o"]).floats)
            }
            return (outs, plan)
        }
        let (fused, fplan) = try run(false)
        let (plain, pplan) = try run(true)
        XCTAssertEqual(fplan.fusions["attention"], 1)
        XCTAssertNil(fplan.fusions["state_write"], "the K write stays after the attention that reads the old cache")
        XCTAssertNil(pplan.fusions["attention"])
        for i in 0..<3 {
            let err = zip(fused[i], plain[i]).map { abs($0 - $1) }.max() ?? .nan
            XCTAssertLessThanOrEqual(err, 1e-5, "call \(i): fused attention sees the cache after the write")
        }
    }

    /// A NaN in the additive mask makes the graph's softmax row NaN: the fused attention gives
    /// NaN in the same places (it does not skip the NaN column as if it were masked).
    func testNaNMaskColumnGivesNaNLikeTheGraph() throws {
        for nanCol in [0, 5] {
            func run(_ l: Layer) throws -> [Float] {
                let f = build(l)
                let plan = try ExecutionPlan(function: f)
                var states: [String: StateBuffer] = [:]
                for v in f.stateInputs { states[v.name] = try StateBuffer(name: v.name, type: v.type.stateWrappedTensor!) }
                var g = Rand(state: 3)
                var mask = [Float](repeating: 0, count: l.s * l.ctx)
                mask[nanCol] = .nan
                var inputs: [String: Tensor] = [
                    "q": Tensor(.fp32, shape: [1, l.h, l.s, l.d], floats: g.array(l.h * l.s * l.d)),
                    "k_new": Tensor(.fp32, shape: [1, l.kv, l.s, l.d], floats: g.array(l.kv * l.s * l.d)),
                    "v_new": Tensor(.fp32, shape: [1, l.kv, l.s, l.d], floats: g.array(l.kv * l.s * l.d)),
                    "idx": Tensor(.int32, shape: [l.s], ints: (0..<Int32(l.s)).map { $0 }),
                    "begin": Tensor(.int32, shape: [4], ints: [0, 0, 0, 0]),
                    "end": Tensor(.int32, shape: [4], ints: [1, Int32(l.kv), Int32(l.s), Int32(l.d)]),
                    "mask": Tensor(.fp32, shape: [1, 1, l.s, l.ctx], floats: mask),
                ]
                if l.scaleInput { inputs["scale"] = Tensor.scalar(0.25) }
                return try XCTUnwrap(try plan.run(inputs: inputs, states: states)["o"]).floats
            }
            var l = Layer()
            let fused = try run(l)
            l.scaleInput = true
            let plain = try run(l)
            XCTAssertEqual(fused.map(\.isNaN), plain.map(\.isNaN), "NaN pattern differs, NaN mask column \(nanCol)")
        }
    }
}
