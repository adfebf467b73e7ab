import Foundation
import GraphIR
import Interpreter
@testable import Diagnostics
@testable import Passes
import Generation
import TestSupport
import XCTest

/// The runtime checks of `diagnose` (fp16 overflow, S=1 against S=N) and the fix passes
/// `fp16_safe_rms_norm` / `clamp_fp16_constants`, on the LLM-contract fixtures of
/// tools/make_diag_fixtures.py (RUNTIME_EXPECTED) and on Swift-built programs.
final class RuntimeDiagnoseTests: XCTestCase {
    func load(_ name: String) throws -> Model { try ModelLoader.load(path: Fixtures.path(name)) }
    func significant(_ d: Diagnosis) -> [String] { d.findings.filter { $0.severity != .info && !Self.contract.contains($0.code) }.map(\.code) }
    /// Every finding code but the stateful-LLM contract's own catalogue patterns (RangeDim token
    /// ids and a fixed cache_offset next to states, state widths; checked by CatalogueTests).
    func codes(_ d: Diagnosis) -> [String] { d.findings.map(\.code).filter { !Self.contract.contains($0) } }
    static let contract: Set<String> = ["state_range_int_input", "state_mixed_flexibility", "state_dim_not_multiple_of_32"]

    /// 16 deterministic token ids below `vocab`.
    func ids(_ n: Int, vocab: Int) -> [Int32] { (0..<n).map { Int32(($0 * 7 + 3) % vocab) } }

    /// A prefill of `n` tokens through the LLM contract.
    func prefill(_ f: Function, n: Int = 16) throws -> RuntimeScenario {
        let c = try GenerationContract.detect(function: f)
        let vocab = try XCTUnwrap(f.outputs.first { $0.name == c.logits }?.type.tensorType?.shape.last?.fixedValue)
        return RuntimeScenario(calls: [try c.inputs(ids: ids(n, vocab: vocab), position: 0, function: f)], label: "prefill of \(n)")
    }

    func dynamic(_ f: Function, n: Int = 16) throws -> (RuntimeRun, [Finding]) {
        let c = try GenerationContract.detect(function: f)
        let t = ids(n, vocab: try XCTUnwrap(f.outputs.first { $0.name == c.logits }?.type.tensorType?.shape.last?.fixedValue))
        let split = RuntimeScenario(calls: [try c.inputs(ids: Array(t.dropLast()), position: 0, function: f),
                                            try c.inputs(ids: [t[n - 1]], position: n - 1, function: f)], label: "split")
        let whole = RuntimeScenario(calls: [try c.inputs(ids: t, position: 0, function: f)], label: "whole")
        return try RuntimeChecks.sequenceConsistency(function: f, split: split, whole: whole, output: c.logits, binding: ["input_ids_1": 1])
    }

    /// Runs `calls` from fresh states and returns the last call's outputs.
    func runCalls(_ model: Model, _ calls: [[String: Tensor]], precision: Precision) throws -> [String: Tensor] {
        let s = try Session(model: model, precision: precision)
        var out: [String: Tensor] = [:]
        for c in calls { out = try s.predict(c) }
        return out
    }

    func maxAbsDiff(_ a: [Float], _ b: [Float]) -> Float {
        XCTAssertEqual(a.count, b.count)
        return zip(a, b).reduce(0) { max($0, abs($1.0 - $1.1)) }
    }

    // MARK: - fp16 overflow

    func testFP16OverflowNamesTheNormSquare() throws {
        let model = try load("diag/fp16_rmsnorm_overflow.mlpackage")
        let f = model.program.functions[0]
        // Statically: only the note, pointing at the pass.
        let d = Diagnoser.diagnose(model)
        XCTAssertEqual(significant(d), [], d.text(modelPath: "fixture"))
        XCTAssertEqual(codes(d), ["fp16_square_in_norm"])
        XCTAssertEqual(d.findings.first { $0.code == "fp16_square_in_norm" }?.fixPass, "fp16_safe_rms_norm")
        // At run time in fp16: the square overflows.
        let (run, findings) = try RuntimeChecks.fp16Overflow(function: f, scenario: try prefill(f), binding: ["input_ids_1": 16])
        XCTAssertFalse(run.ok)
        XCTAssertEqual(findings.map(\.code), ["fp16_overflow"])
        let finding = try XCTUnwrap(findings.first)
        XCTAssertEqual(finding.severity, .error)
        XCTAssertEqual(finding.op?.name, "norm_sq")
        XCTAssertEqual(finding.op?.type, "mul")
        XCTAssertEqual(finding.fixPass, "fp16_safe_rms_norm")
        XCTAssertNotNil(PassRegistry.pass(named: "fp16_safe_rms_norm"))
        XCTAssertEqual(finding.binding, ["input_ids_1": 16])
        XCTAssertTrue(finding.message.contains("RMSNorm 1 of 1"), finding.message)
        XCTAssertTrue(finding.shapes.contains { $0.name == "x" && $0.dims == [.fixed(1), .fixed(16), .fixed(8)] && $0.text == "x tensor<fp16, [1, 16, 8]>" }, "\(finding.shapes.map(\.text))")
        // JSON: the fix is available, the run is listed.
        var all = d
        all.add(run, findings: findings)
        let j = all.json(modelPath: "m")
        let jf = try XCTUnwrap(j["findings"]?.arrayValue?.first)
        XCTAssertEqual(jf["code"]?.stringValue, "fp16_overflow")
        XCTAssertEqual(jf["fix"]?["available"], .bool(true))
        XCTAssertEqual(j["runs"]?.arrayValue?.first?["check"]?.stringValue, "fp16_overflow")
        XCTAssertEqual(j["runs"]?.arrayValue?.first?["ok"], .bool(false))
        XCTAssertEqual(all.errorCount, 1)
    }

    func testCleanFixturesRunCleanInFP16AndAtS1() throws {
        for name in ["tiny_llama_fp16.mlpackage", "tiny_llama_int8.mlpackage", "smollm2_twin_int8.mlpackage", "diag/fp16_rmsnorm_overflow.mlpackage"] {
            let model = try load(name)
            let f = model.program.functions[0]
            if !name.hasPrefix("diag/") {
                let (run, findings) = try RuntimeChecks.fp16Overflow(function: f, scenario: try prefill(f))
                XCTAssertTrue(run.ok, "\(name): \(run.summary)")
                XCTAssertEqual(findings.map(\.code), [], name)
            }
            let (run, findings) = try dynamic(f)
            XCTAssertTrue(run.ok, "\(name): \(run.summary)")
            XCTAssertEqual(findings.map(\.code), [], name)
        }
    }

    // MARK: - S = 1 against S = N

    func testS1MismatchNamesThePositionGather() throws {
        let model = try load("diag/s1_position_range.mlpackage")
        XCTAssertEqual(significant(Diagnoser.diagnose(model)), [])
        let (run, findings) = try dynamic(model.program.functions[0])
        XCTAssertFalse(run.ok)
        XCTAssertEqual(findings.map(\.code), ["s1_mismatch"])
        let finding = try XCTUnwrap(findings.first)
        XCTAssertEqual(finding.severity, .error)
        XCTAssertEqual(finding.op?.name, "pos_emb_rows")
        XCTAssertEqual(finding.op?.type, "gather")
        XCTAssertEqual(finding.binding, ["input_ids_1": 1])
        XCTAssertTrue(finding.message.contains("last row of 'logits' differs"), finding.message)
    }

    func testLastRowDifference() {
        let a = Tensor(.fp32, shape: [1, 1, 2], floats: [5, 6])
        let b = Tensor(.fp32, shape: [1, 3, 2], floats: [1, 2, 3, 4, 5, 6.5])
        let d = RuntimeChecks.lastRowDifference(a, b)
        XCTAssertEqual(d?.0, 0.5)
        XCTAssertEqual(d?.1, 6.5)
        XCTAssertNil(RuntimeChecks.lastRowDifference(b, b))
        XCTAssertNil(RuntimeChecks.lastRowDifference(a, Tensor(.fp32, shape: [1, 3, 3], floats: Array(repeating: 0, count: 9))))
        // Axis 0 of rank 2 ([S, D] gathers).
        let c = RuntimeChecks.lastRowDifference(Tensor(.fp32, shape: [1, 2], floats: [1, 1]), Tensor(.fp32, shape: [2, 2], floats: [0, 0, 1, 3]))
        XCTAssertEqual(c?.0, 2)
    }

    // MARK: - fp16_safe_rms_norm

    func testFP16SafeRMSNormFixesTheFixtureAndKeepsFP32Numerics() throws {
        let original = try load("diag/fp16_rmsnorm_overflow.mlpackage")
        let model = try load("diag/fp16_rmsnorm_overflow.mlpackage")
        let r = try FP16SafeRMSNorm().run(on: model)
        XCTAssertEqual(r.statistics["rms norms made fp16-safe"], 1)
        try Verifier.verify(model)
        XCTAssertFalse(try FP16SafeRMSNorm().run(on: model).changed, "rewrites the safe form again")
        let d = Diagnoser.diagnose(model, options: DiagnoseOptions(seq: [1, 16]))
        XCTAssertEqual(codes(d), [], d.text(modelPath: "fixed"))
        let f = model.program.functions[0]
        let (run, findings) = try RuntimeChecks.fp16Overflow(function: f, scenario: try prefill(f))
        XCTAssertTrue(run.ok, run.summary)
        XCTAssertEqual(findings.count, 0)

        // Prefill 15 then decode 1: fp32 mode of the fixed graph = fp32 mode of the original;
        // fp16 mode of the fixed graph ≈ fp32 mode, while the original's fp16 mode is far off.
        let c = try GenerationContract.detect(function: f)
        let t = ids(16, vocab: 32)
        let calls = [try c.inputs(ids: Array(t.dropLast()), position: 0, function: f), try c.inputs(ids: [t[15]], position: 15, function: f)]
        let ref = try XCTUnwrap(runCalls(original, calls, precision: .fp32)["logits"]).floats
        let fixed32 = try XCTUnwrap(runCalls(model, calls, precision: .fp32)["logits"]).floats
        let fixed16 = try XCTUnwrap(runCalls(model, calls, precision: .fp16)["logits"]).floats
        let broken16 = try XCTUnwrap(runCalls(original, calls, precision: .fp16)["logits"]).floats
        let scale = ref.map(abs).max()!
        XCTAssertLessThanOrEqual(maxAbsDiff(ref, fixed32), 2e-3 * scale)
        XCTAssertLessThanOrEqual(maxAbsDiff(ref, fixed16), 3e-2 * scale)
        XCTAssertGreaterThan(maxAbsDiff(ref, broken16), 0.3 * scale)
    }

    func testFP16SafeRMSNormOnTinyLlamaKeepsShapesAndNumerics() throws {
        let original = try load("tiny_llama_fp16.mlpackage")
        let model = try load("tiny_llama_fp16.mlpackage")
        XCTAssertEqual(try FP16SafeRMSNorm().run(on: model).statistics["rms norms made fp16-safe"], 5)
        try Verifier.verify(model)
        let d = Diagnoser.diagnose(model, options: DiagnoseOptions(seq: [1, 16, 64]))
        XCTAssertEqual(codes(d), [], d.text(modelPath: "fixed"))
        let f = model.program.functions[0]
        let c = try GenerationContract.detect(function: f)
        let t = ids(12, vocab: 256)
        let calls = [try c.inputs(ids: Array(t.dropLast()), position: 0, function: f), try c.inputs(ids: [t[11]], position: 11, function: f)]
        let a = try XCTUnwrap(runCalls(original, calls, precision: .fp32)["logits"]).floats
        let b = try XCTUnwrap(runCalls(model, calls, precision: .fp32)["logits"]).floats
        XCTAssertLessThanOrEqual(maxAbsDiff(a, b), 2e-3 * a.map(abs).max()!)
    }

    /// `x: [1, 4, 8]` fp16 through a naive RMSNorm in one of its spellings.
    func normProgram(square: String, root: String, swapApply: Bool = false) -> Function {
        let x = Value(name: "x", type: .tensor(.fp16, [1, 4, 8]))
        var ops: [Op] = []
        func const(_ n: String, _ t: Tensor, _ type: TensorType) -> Value {
            let op = Op.const(n, ConstEncoding.constValue(t, type: type)!)
            ops.append(op)
            return op.outputs[0]
        }
        func op(_ type: String, _ n: String, _ inputs: [(String, Value)], _ out: TensorType) -> Value {
            let o = Op(type: type, inputs: inputs.map { OpInput(name: $0.0, operands: [.value($0.1)]) },
                       outputs: [Value(name: n, type: .tensor(out))], attributes: [Attribute(name: "name", value: .string(n))])
            ops.append(o)
            return o.outputs[0]
        }
        let full = TensorType(.fp16, fixed: [1, 4, 8]), reduced = TensorType(.fp16, fixed: [1, 4, 1])
        let sq: Value
        switch square {
        case "pow": sq = op("pow", "sq", [("x", x), ("y", const("two", .scalar(2, .fp16), TensorType(.fp16, [])))], full)
        case "square": sq = op("square", "sq", [("x", x)], full)
        default: sq = op("mul", "sq", [("x", x), ("y", x)], full)
        }
        let axes = const("axes", Tensor(.int32, shape: [1], ints: [-1]), TensorType(.int32, fixed: [1]))
        let keep = const("keep", Tensor(shape: [], bools: [true]), TensorType(.bool, []))
        let ms = op("reduce_mean", "ms", [("x", sq), ("axes", axes), ("keep_dims", keep)], reduced)
        let eps = const("eps", .scalar(1e-5, .fp16), TensorType(.fp16, []))
        let v = op("add", "v", swapApply ? [("x", eps), ("y", ms)] : [("x", ms), ("y", eps)], reduced)
        let y: Value
        if root == "sqrt" {
            let r = op("sqrt", "r", [("x", v)], reduced)
            y = op("real_div", "y", [("x", x), ("y", r)], full)
        } else {
            let r = op("rsqrt", "r", [("x", v)], reduced)
            y = op("mul", "y", swapApply ? [("x", r), ("y", x)] : [("x", x), ("y", r)], full)
        }
        return Function(name: "main", inputs: [x], opset: "CoreML8", body: Block(operations: ops, outputs: [y]))
    }

    func testFP16SafeRMSNormSpellings() throws {
        let host = try load("diag/fp16_rmsnorm_overflow.mlpackage")
        // Rows of very different magnitudes: tiny, ~1, ~500 (overflows when squared), zeros.
        var values: [Float] = []
        for row in 0..<4 {
            let s: Float = [1e-3, 1, 500, 0][row]
            values += (0..<8).map { s * Float($0 % 3 == 0 ? -1 : 1) * (1 + Float($0) / 8) }
        }
        let input = Tensor(.fp16, shape: [1, 4, 8], floats: values)
        for (square, root, swap) in [("mul", "rsqrt", false), ("pow", "sqrt", false), ("square", "rsqrt", true), ("square", "sqrt", true)] {
            let label = "\(square)/\(root)\(swap ? "/swapped" : "")"
            let original = normProgram(square: square, root: root, swapApply: swap)
            let f = normProgram(square: square, root: root, swapApply: swap)
            let uses = UseMap(f)
            let sq = try XCTUnwrap(f.body.operations.first { $0.name == "sq" })
            XCTAssertNotNil(RMSNormIdiom.match(square: sq, uses: uses), label)
            XCTAssertEqual(NumericChecks.run(function: f).first?.fixPass, "fp16_safe_rms_norm", label)
            XCTAssertEqual(try FP16SafeRMSNorm().run(on: f, in: host).statistics["rms norms made fp16-safe"], 1, label)
            try Verifier.verify(f, path: label)
            XCTAssertEqual(NumericChecks.run(function: f).map(\.code), [], label)
            let ref = try ExecutionPlan(function: original, precision: .fp32).run(inputs: ["x": input])["y"]!.floats
            let fixed = try ExecutionPlan(function: f, precision: .fp32).run(inputs: ["x": input])["y"]!.floats
            let fixed16 = try ExecutionPlan(function: f, precision: .fp16).run(inputs: ["x": input])["y"]!.floats
            let broken16 = try ExecutionPlan(function: original, precision: .fp16).run(inputs: ["x": input])["y"]!.floats
            for i in ref.indices {
                XCTAssertEqual(fixed[i], ref[i], accuracy: 2e-3 * max(abs(ref[i]), 1e-2), "\(label) fp32 [\(i)]")
                XCTAssertEqual(fixed16[i], ref[i], accuracy: 1e-2 * max(abs(ref[i]), 1e-1), "\(label) fp16 [\(i)]")
            }
            // The original zeroes the large row in fp16.
            XCTAssertEqual(broken16[16..<24].map(abs).max(), 0, label)
            XCTAssertGreaterThan(ref[16..<24].map(abs).max()!, 1, label)
        }
    }

    func testFP16SafeRMSNormLeavesSharedIntermediatesAlone() throws {
        let f = normProgram(square: "mul", root: "rsqrt")
        // A second user of the mean: rewriting would change it.
        let ms = try XCTUnwrap(f.body.operations.first { $0.name == "ms" }?.outputs.first)
        f.body.outputs.append(ms)
        XCTAssertFalse(try FP16SafeRMSNorm().run(on: f, in: try load("diag/fp16_rmsnorm_overflow.mlpackage")).changed)
        XCTAssertNil(NumericChecks.run(function: f).first?.fixPass)
        XCTAssertEqual(NumericChecks.run(function: f).map(\.code), ["fp16_square_in_norm"])
    }

    // MARK: - clamp_fp16_constants

    func testClampFP16ConstantsOnTheMaskFixture() throws {
        let original = try load("diag/mask_beyond_fp16.mlpackage")
        let model = try load("diag/mask_beyond_fp16.mlpackage")
        let before = Diagnoser.diagnose(original)
        XCTAssertEqual(before.findings.first?.fixPass, "clamp_fp16_constants")
        XCTAssertEqual(before.json(modelPath: "m")["findings"]?.arrayValue?.first?["fix"]?["available"], .bool(true))
        XCTAssertTrue(before.findings.first?.fix.contains("-10000") == true, before.findings.first?.fix ?? "")
        // fp16 run on the original: the cast of the -1e9 mask overflows, the clamp pass is the fix.
        let x = Tensor(.fp32, shape: [1, 4], floats: [0.5, -1, 2, 3])
        let f0 = original.program.functions[0]
        let (run0, found) = try RuntimeChecks.fp16Overflow(function: f0, scenario: RuntimeScenario(calls: [["x": x]], label: "x"))
        XCTAssertFalse(run0.ok)
        XCTAssertEqual(found.first?.op?.name, "mask_fp16")
        XCTAssertEqual(found.first?.fixPass, "clamp_fp16_constants")

        let r = try ClampFP16Constants().run(on: model)
        XCTAssertEqual(r.statistics["mask constants clamped"], 1)
        XCTAssertEqual(r.statistics["values clamped"], 2)
        try Verifier.verify(model)
        XCTAssertEqual(significant(Diagnoser.diagnose(model)), [])
        XCTAssertFalse(try ClampFP16Constants().run(on: model).changed)
        var mask: [Double]?
        model.program.functions[0].body.walk { if $0.name == "mask" { mask = $0.constValue?.doubles() } }
        XCTAssertEqual(mask, [0, 0, -1e4, -1e4])
        let f = model.program.functions[0]
        let (run1, none) = try RuntimeChecks.fp16Overflow(function: f, scenario: RuntimeScenario(calls: [["x": x]], label: "x"))
        XCTAssertTrue(run1.ok, run1.summary)
        XCTAssertEqual(none.count, 0)
        let out = try ExecutionPlan(function: f, precision: .fp16).run(inputs: ["x": x])["out"]!.floats
        XCTAssertEqual(out, [0.5, -1, -10000, -10000])   // 2 - 1e4 and 3 - 1e4 in fp16 (spacing 8)
    }

    /// scores (fp32) → fp16 → + cast(mask) → softmax → fp32, with the mask an fp32 constant.
    func softmaxMaskProgram(mask: [Float], rows: Int) -> Function {
        let x = Value(name: "scores", type: .tensor(.fp32, [rows, 4]))
        var ops: [Op] = []
        func op(_ type: String, _ n: String, _ inputs: [(String, Operand)], _ out: TensorType) -> Value {
            let o = Op(type: type, inputs: inputs.map { OpInput(name: $0.0, operands: [$0.1]) },
                       outputs: [Value(name: n, type: .tensor(out))], attributes: [Attribute(name: "name", value: .string(n))])
            ops.append(o)
            return o.outputs[0]
        }
        let m = Op.const("mask", ConstValue(type: .tensor(.fp32, [rows, 4]), payload: .tensor(.floats(mask))))
        ops.append(m)
        func str(_ s: String) -> Operand { .constant(.string(s)) }
        let xh = op("cast", "scores_fp16", [("x", .value(x)), ("dtype", str("fp16"))], TensorType(.fp16, fixed: [rows, 4]))
        let mh = op("cast", "mask_fp16", [("x", .value(m.outputs[0])), ("dtype", str("fp16"))], TensorType(.fp16, fixed: [rows, 4]))
        let s = op("add", "masked", [("x", .value(xh)), ("y", .value(mh))], TensorType(.fp16, fixed: [rows, 4]))
        let p = op("softmax", "probs", [("x", .value(s)), ("axis", .constant(.int32(-1)))], TensorType(.fp16, fixed: [rows, 4]))
        let y = op("cast", "out", [("x", .value(p)), ("dtype", str("fp32"))], TensorType(.fp32, fixed: [rows, 4]))
        return Function(name: "main", inputs: [x], opset: "CoreML8", body: Block(operations: ops, outputs: [y]))
    }

    func testClampFP16ConstantsKeepsTheSoftmaxInFP32AndFixesFP16() throws {
        let host = try load("diag/mask_beyond_fp16.mlpackage")
        let mask: [Float] = [0, 0, -1e9, -1e9, 0, -3.4e38, -1e9, 0, -1e9, -1e9, -1e9, -1e9]
        let scores = Tensor(.fp32, shape: [3, 4], floats: [1, 2, 3, 4, -2, 0.5, 7, 1, 0, 1, 2, 3])
        let original = softmaxMaskProgram(mask: mask, rows: 3)
        let f = softmaxMaskProgram(mask: mask, rows: 3)
        XCTAssertEqual(try ClampFP16Constants().run(on: f, in: host).statistics["values clamped"], 8)
        try Verifier.verify(f, path: "softmax")
        let mask2 = f.body.operations.first { $0.name == "mask" }?.constValue?.doubles()
        XCTAssertEqual(mask2, [0, 0, -1e4, -1e4, 0, -1e4, -1e4, 0, -1e4, -1e4, -1e4, -1e4])
        // fp32: identical where a row keeps some weight (the masked weights are 0 either way).
        let a = try ExecutionPlan(function: original, precision: .fp32).run(inputs: ["scores": scores])["out"]!.floats
        let b = try ExecutionPlan(function: f, precision: .fp32).run(inputs: ["scores": scores])["out"]!.floats
        for i in 0..<8 { XCTAssertEqual(a[i], b[i], accuracy: 1e-6, "[\(i)]") }
        // fp16: the fully masked row is NaN in the original, a finite distribution once clamped.
        let a16 = try ExecutionPlan(function: original, precision: .fp16).run(inputs: ["scores": scores])["out"]!.floats
        let b16 = try ExecutionPlan(function: f, precision: .fp16).run(inputs: ["scores": scores])["out"]!.floats
        XCTAssertTrue(a16[8..<12].contains { $0.isNaN })
        XCTAssertTrue(b16.allSatisfy(\.isFinite))
        XCTAssertEqual(b16[8..<12].reduce(0, +), 1, accuracy: 1e-2)
        // The runtime check names the first NaN: the softmax of the all -inf row.
        let (_, found) = try RuntimeChecks.fp16Overflow(function: original, scenario: RuntimeScenario(calls: [["scores": scores]], label: "s"))
        XCTAssertEqual(found.first?.op?.name, "mask_fp16")
    }

    func testClampFP16ConstantsNonMaskGoesToFP16Max() throws {
        // A scale constant beyond fp16 feeding a cast to fp16, then a mul: not a mask.
        let x = Value(name: "x", type: .tensor(.fp16, [2]))
        let c = Op.const("big", ConstValue(type: .tensor(.fp32, [2]), payload: .tensor(.floats([1e5, -2e5]))))
        let cast = Op(type: "cast", inputs: [OpInput(name: "x", operands: [.value(c.outputs[0])]), OpInput(name: "dtype", operands: [.constant(.string("fp16"))])],
                      outputs: [Value(name: "big_fp16", type: .tensor(.fp16, [2]))], attributes: [Attribute(name: "name", value: .string("big_fp16"))])
        let mul = Op(type: "mul", inputs: [OpInput(name: "x", operands: [.value(x)]), OpInput(name: "y", operands: [.value(cast.outputs[0])])],
                     outputs: [Value(name: "y", type: .tensor(.fp16, [2]))], attributes: [Attribute(name: "name", value: .string("y"))])
        let f = Function(name: "main", inputs: [x], opset: "CoreML8", body: Block(operations: [c, cast, mul], outputs: [mul.outputs[0]]))
        let r = try ClampFP16Constants().run(on: f, in: try load("diag/mask_beyond_fp16.mlpackage"))
        XCTAssertEqual(r.statistics["constants clamped"], 1)
        XCTAssertEqual(c.constValue?.doubles(), [65504, -65504])
    }
}
