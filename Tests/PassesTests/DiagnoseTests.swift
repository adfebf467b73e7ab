import Foundation
import GraphIR
import Interpreter
@testable import Passes
import TestSupport
import XCTest

/// Symbolic shape inference and `diagnose` on the committed fixtures and on Swift-built programs.
final class DiagnoseTests: XCTestCase {
    func load(_ name: String) throws -> Model { try ModelLoader.load(path: Fixtures.path(name)) }

    /// Codes of the findings above `info`.
    func significant(_ d: Diagnosis) -> [String] { d.findings.filter { $0.severity != .info && !Self.contract.contains($0.code) }.map(\.code) }
    /// Every finding code but the stateful-LLM contract's own catalogue patterns (RangeDim token
    /// ids and a fixed cache_offset next to states, state widths; checked by CatalogueTests).
    func codes(_ d: Diagnosis) -> [String] { d.findings.map(\.code).filter { !Self.contract.contains($0) } }
    static let contract: Set<String> = ["state_range_int_input", "state_mixed_flexibility", "state_dim_not_multiple_of_32"]

    // MARK: - DimExpr

    func testDimExprSimplifies() {
        let s = DimExpr.symbol("S"), t = DimExpr.symbol("T")
        XCTAssertEqual(s + 1 - 1, s)
        XCTAssertEqual(DimExpr.floorDiv(s * 64, 64), s)
        XCTAssertEqual(DimExpr.floorDiv(s * 64 + t * 128, 64), s + t * 2)
        XCTAssertEqual(DimExpr.floorDiv(s * 4 * t, s), t * 4)
        XCTAssertEqual(DimExpr.mod(s * 8, 4), 0)
        XCTAssertEqual(DimExpr.min(s + 2, s), s)
        XCTAssertEqual(DimExpr.max(s + 2, s), s + 2)
        XCTAssertEqual(DimExpr.floorDiv(-7, 2), -4)
        XCTAssertEqual(DimExpr.mod(-7, 2), 1)
        XCTAssertEqual((s - s).constant, 0)
        XCTAssertNil(DimExpr.floorDiv(s, 3).constant)
        XCTAssertEqual(DimExpr.floorDiv(s, 3).evaluate(["S": 10]), 3)
        XCTAssertEqual(DimExpr.ceilDiv(s, 4).evaluate(["S": 9]), 3)
        XCTAssertEqual((s * s + s * 2).evaluate(["S": 3]), 15)
        XCTAssertNil((s + .opaque("off")).evaluate(["S": 3]))
        XCTAssertEqual((s + .opaque("off")).substituting(["S": 3]), .opaque("off") + 3)
        XCTAssertEqual((s * 2 + 1).description, "2*S + 1")
        XCTAssertEqual((s * 2 + 1).renaming(["S": "T"]), t * 2 + 1)
    }

    // MARK: - inference on the LLM fixtures

    func testOneSymbolForTheSequenceDimension() throws {
        let model = try load("tiny_llama_fp16.mlpackage")
        let f = model.program.functions[0]
        let inf = ShapeInference(function: f, interface: model.description.interface(of: f.name))
        XCTAssertEqual(inf.symbols.count, 1)
        let s = inf.symbols[0]
        XCTAssertEqual(s.name, "input_ids_1")
        XCTAssertEqual(s.members.map(\.description), ["input_ids[1]", "causal_mask[2]", "position_ids[1]"])
        XCTAssertEqual(s.constraint, .range(lower: 1, upper: 64))
        // logits are [1, S, 256]; nothing is left opaque and no declared type disagrees.
        let logits = f.outputs[0]
        XCTAssertEqual(inf.symbolic.type(of: logits)?.tensor?.shape, [1, .symbol("input_ids_1"), 256])
        XCTAssertTrue(inf.symbolic.issues.isEmpty, "\(inf.symbolic.issues)")
        f.body.walk { op in
            for v in op.outputs {
                guard let sh = inf.symbolic.type(of: v)?.tensor?.shape else { continue }
                XCTAssertFalse(sh.contains { $0.hasOpaque }, "\(op.name) (\(op.type)): \(describeShape(sh))")
            }
        }
    }

    func testRunTimeEndIsTrackedSymbolically() throws {
        let model = try load("tiny_llama_dynamic_end.mlpackage")
        let f = model.program.functions[0]
        let inf = ShapeInference(function: f, interface: model.description.interface(of: f.name))
        var su: Op?
        f.body.walk { if $0.type == "slice_update", su == nil { su = $0 } }
        let end = try XCTUnwrap(su?.operand("end")?.value)
        let off = DimExpr.opaque("cache_offset[0]")
        XCTAssertEqual(inf.symbolic.value(of: end), .elements([0, 0, off + .symbol("input_ids_1"), 0]))
        // At a binding the length folds, the run-time offset does not.
        let r = inf.infer(binding: ["input_ids_1": 16])
        XCTAssertNil(r.firstError)
        XCTAssertEqual(r.value(of: end), .elements([0, 0, off + 16, 0]))
    }

    func testConcreteInferenceMatchesTheInterpreter() throws {
        let model = try load("tiny_llama_fp16.mlpackage")
        let f = model.program.functions[0]
        let inf = ShapeInference(function: f, interface: model.description.interface(of: f.name))
        let s = 5
        let r = inf.infer(binding: ["input_ids_1": s])
        XCTAssertNil(r.firstError)
        let session = try Session(model: model, precision: .fp32)
        let out = try session.predict([
            "input_ids": Tensor(.int32, shape: [1, s], ints: [1, 2, 3, 4, 5]),
            "causal_mask": Tensor(.fp16, shape: [1, 1, s, 64], floats: Array(repeating: 0, count: s * 64)),
            "position_ids": Tensor(.int32, shape: [1, s], ints: [0, 1, 2, 3, 4]),
            "cache_offset": Tensor(.int32, shape: [1], ints: [0]),
        ])
        XCTAssertEqual(r.type(of: f.outputs[0])?.tensor?.fixedShape, out["logits"]?.shape)
    }

    // MARK: - diagnose on the clean and the dynamic-end fixtures

    func testCleanStatefulFixturesHaveNoFindings() throws {
        for name in ["tiny_llama_fp16.mlpackage", "tiny_llama_int8.mlpackage"] {
            let model = try load(name)
            for seq in [nil, [1, 16, 64]] as [[Int]?] {
                let d = Diagnoser.diagnose(model, options: DiagnoseOptions(seq: seq))
                XCTAssertEqual(significant(d), [], "\(name) seq \(String(describing: seq)): \(d.text(modelPath: name))")
                XCTAssertTrue(d.functions[0].results.allSatisfy { $0.error == nil })
                let sizes = d.functions[0].results.compactMap { $0.binding["input_ids_1"] }
                XCTAssertEqual(sizes, seq ?? [1, 64])
            }
        }
        let mf = Diagnoser.diagnose(try load("multifunction.mlpackage"))
        XCTAssertEqual(significant(mf), [])
        // The SmolLM2 twin's RMSNorm divides by clip(reduce_max(|x|), 1e-4, +inf) before
        // squaring: no finding at all (no "square in norm" note, no warning for the +inf bound).
        let twin = Diagnoser.diagnose(try load("smollm2_twin_int8.mlpackage"))
        XCTAssertEqual(codes(twin), [], twin.text(modelPath: "smollm2_twin_int8"))
        XCTAssertEqual(mf.functions.map(\.name).sorted(), ["decode", "prefill"])
    }

    func testDynamicEndReportsTheRunTimeEndStateWrite() throws {
        let d = Diagnoser.diagnose(try load("tiny_llama_dynamic_end.mlpackage"))
        XCTAssertEqual(significant(d), Array(repeating: "state_write_runtime_end", count: 4))
        let f = try XCTUnwrap(d.findings.first { $0.code == "state_write_runtime_end" })
        // A warning: Apple's Llama 3.1 recipe runs such writes on the GPU (Catalogue).
        XCTAssertEqual(f.severity, .warning)
        XCTAssertEqual(f.op?.type, "slice_update")
        XCTAssertEqual(f.op?.name, "key_cache_0_internal_tensor_assign_1_cast_fp16")
        XCTAssertEqual(f.fixPass, "lower_slice_update")
        XCTAssertTrue(f.message.contains("cache_offset[0] + input_ids_1"), f.message)
        XCTAssertEqual(d.warningCount - d.findings.filter { $0.severity == .warning && $0.code != "state_write_runtime_end" }.count, 4)
    }

    func testLowerSliceUpdateClearsTheFinding() throws {
        let model = try load("tiny_llama_dynamic_end.mlpackage")
        _ = try LowerSliceUpdate().run(on: model)
        let d = Diagnoser.diagnose(model, options: DiagnoseOptions(seq: [1, 16, 64]))
        XCTAssertEqual(significant(d), [], d.text(modelPath: "lowered"))
    }

    func testSeqOptionFindings() throws {
        let d = Diagnoser.diagnose(try load("tiny_llama_int8.mlpackage"), options: DiagnoseOptions(seq: [1, 2048]))
        XCTAssertEqual(significant(d), ["binding_out_of_range"])
        XCTAssertEqual(d.findings[0].binding, ["input_ids_1": 2048])
        let mf = Diagnoser.diagnose(try load("multifunction.mlpackage"), options: DiagnoseOptions(seq: [256], functions: ["decode"]))
        XCTAssertEqual(significant(mf), ["sequence_fixed"])
    }

    // MARK: - one fixture per finding kind (tools/make_diag_fixtures.py)

    func testEachDiagnosisFixtureReportsExactlyItsFinding() throws {
        let expected: [String: (code: String, severity: Finding.Severity, binding: [String: Int]?)] = [
            "reshape_s1": ("shape_error", .error, ["x_1": 1]),
            "slice_zero_s1": ("zero_dimension", .error, ["x_1": 1]),
            "cast_int8_length": ("cast_overflow", .error, ["x_1": 256]),
            "state_window_overflow": ("index_out_of_range", .error, ["x_1": 32]),
            "squeeze_no_axes": ("squeeze_flexible", .warning, nil),
            "state_output_alias": ("state_output_alias", .error, nil),
            "range_lower_zero": ("range_lower_bound_zero", .error, nil),
            "constraint_mismatch": ("flexible_constraint_mismatch", .warning, nil),
            "enumerated_stateful": ("enumerated_shapes_with_state", .error, nil),
            "mask_beyond_fp16": ("fp16_constant_out_of_range", .warning, nil),
        ]
        for (name, e) in expected.sorted(by: { $0.key < $1.key }) {
            let d = Diagnoser.diagnose(try load("diag/\(name).mlpackage"))
            XCTAssertEqual(significant(d), [e.code], "\(name): \(d.text(modelPath: name))")
            guard let f = d.findings.first else { continue }
            XCTAssertEqual(f.severity, e.severity, name)
            XCTAssertEqual(f.binding, e.binding, name)
        }
    }

    // MARK: - Swift-built programs for what coremltools will not build

    /// `x: [1, S, 8]` (S = RangeDim(1..8)), a `[1, 16, 8]` state, a slice_update with the given
    /// begin/end constants.
    func sliceUpdateProgram(begin: [Int32], end: [Int32]) -> (Function, FunctionDescription) {
        let sym = DimSymbol(name: "x_1", constraint: .range(lower: 1, upper: 8))
        let x = Value(name: "x", type: .tensor(TensorType(.fp16, [.fixed(1), .symbol(sym), .fixed(8)])))
        let st = Value(name: "cache", type: .state(.tensor(.fp16, [1, 16, 8])))
        func ints(_ n: String, _ v: [Int32]) -> Op { .const(n, ConstValue(type: .tensor(.int32, [v.count]), payload: .tensor(.ints(v)))) }
        let b = ints("b", begin), e = ints("e", end)
        let read = Op(type: "read_state", inputs: [OpInput(name: "input", operands: [.value(st)])],
                      outputs: [Value(name: "old", type: .tensor(.fp16, [1, 16, 8]))], attributes: [Attribute(name: "name", value: .string("old"))])
        let su = Op(type: "slice_update", inputs: [
            OpInput(name: "x", operands: [.value(read.outputs[0])]), OpInput(name: "update", operands: [.value(x)]),
            OpInput(name: "begin", operands: [.value(b.outputs[0])]), OpInput(name: "end", operands: [.value(e.outputs[0])]),
        ], outputs: [Value(name: "new", type: .tensor(.fp16, [1, 16, 8]))], attributes: [Attribute(name: "name", value: .string("write"))])
        let ws = Op(type: "write_state", inputs: [OpInput(name: "input", operands: [.value(st)]), OpInput(name: "data", operands: [.value(su.outputs[0])])],
                    attributes: [Attribute(name: "name", value: .string("ws"))])
        let y = Op(type: "mul", inputs: [OpInput(name: "x", operands: [.value(x)]), OpInput(name: "y", operands: [.value(x)])],
                   outputs: [Value(name: "y", type: .tensor(TensorType(.fp16, [.fixed(1), .unknown, .fixed(8)])))], attributes: [Attribute(name: "name", value: .string("y"))])
        let f = Function(name: "main", inputs: [x, st], opset: "CoreML8", body: Block(operations: [b, e, read, su, ws, y], outputs: [y.outputs[0]]))
        let iface = FunctionDescription(
            name: "main",
            inputs: [FeatureDescription(name: "x", kind: .multiArray(ArrayFeature(shape: [1, 1, 8], dataType: .float16,
                                                                                  flexibility: .range([SizeRange(lower: 1, upper: 1), SizeRange(lower: 1, upper: 8), SizeRange(lower: 8, upper: 8)]))))],
            outputs: [FeatureDescription(name: "y", kind: .multiArray(ArrayFeature(shape: [], dataType: .float16)))],
            states: [FeatureDescription(name: "cache", kind: .state(ArrayFeature(shape: [1, 16, 8], dataType: .float16)))])
        return (f, iface)
    }

    func testSliceUpdateRankMismatch() {
        let (f, iface) = sliceUpdateProgram(begin: [0, 0], end: [1, 8])
        let (_, findings) = Diagnoser.diagnose(function: f, interface: iface, options: DiagnoseOptions())
        XCTAssertEqual(findings.filter { $0.severity != .info }.map(\.code), ["slice_update_rank"])
        XCTAssertEqual(findings.first { $0.code == "slice_update_rank" }?.op?.name, "write")
    }

    func testStaticSliceUpdateWithinTheStateIsClean() {
        // A constant window [0, 8) on axis 1 matches the update only at S = 8.
        let (f, iface) = sliceUpdateProgram(begin: [0, 0, 0], end: [1, 8, 8])
        let (_, all) = Diagnoser.diagnose(function: f, interface: iface, options: DiagnoseOptions(seq: [8]))
        let findings = all.filter { !Self.contract.contains($0.code) }
        XCTAssertEqual(findings.map(\.code), [])
        let (_, atOneAll) = Diagnoser.diagnose(function: f, interface: iface, options: DiagnoseOptions(seq: [1]))
        let atOne = atOneAll.filter { !Self.contract.contains($0.code) }
        XCTAssertEqual(atOne.map(\.code), ["shape_error"])
        XCTAssertEqual(atOne.first?.binding, ["x_1": 1])
    }

    func testStateDescriptionMismatch() {
        var (f, iface) = sliceUpdateProgram(begin: [0, 0, 0], end: [1, 8, 8])
        iface.states = [FeatureDescription(name: "cache", kind: .state(ArrayFeature(shape: [1, 32, 8], dataType: .float16))),
                        FeatureDescription(name: "other", kind: .state(ArrayFeature(shape: [4], dataType: .float16)))]
        let (_, findings) = Diagnoser.diagnose(function: f, interface: iface, options: DiagnoseOptions(seq: [8]))
        XCTAssertEqual(findings.map(\.code).filter { !Self.contract.contains($0) }, ["state_description_mismatch", "state_description_mismatch"])
    }

    // MARK: - insert_state_output_copy

    func testInsertStateOutputCopyFixesTheAliasAndKeepsNumerics() throws {
        let model = try load("diag/state_output_alias.mlpackage")
        let reference = try load("diag/state_output_alias.mlpackage")
        let r = try InsertStateOutputCopy().run(on: model)
        XCTAssertEqual(r.statistics["output copies inserted"], 1)
        try Verifier.verify(model)
        XCTAssertEqual(model.program.functions[0].outputs.map(\.name), reference.program.functions[0].outputs.map(\.name))
        XCTAssertEqual(significant(Diagnoser.diagnose(model)), [])
        XCTAssertFalse(try InsertStateOutputCopy().run(on: model).changed)
        // Same outputs and state over three calls, in fp32.
        let a = try Session(model: reference, precision: .fp32), b = try Session(model: model, precision: .fp32)
        for step in 0..<3 {
            let x = Tensor(.fp16, shape: [1, 4], floats: [0.5, -1, 2, Float(step)])
            let oa = try a.predict(["x": x]), ob = try b.predict(["x": x])
            XCTAssertEqual(oa["new_acc"]?.floats, ob["new_acc"]?.floats)
            XCTAssertEqual(a.states.buffers["acc"]?.tensor().floats, b.states.buffers["acc"]?.tensor().floats)
        }
        XCTAssertEqual(a.states.buffers["acc"]?.tensor().floats, [1.5, -3, 6, 3])
    }

    func testJSONHasTheDocumentedKeys() throws {
        let d = Diagnoser.diagnose(try load("tiny_llama_dynamic_end.mlpackage"))
        let j = d.json(modelPath: "m")
        XCTAssertEqual(j["schema"]?.intValue, 1)
        XCTAssertEqual(j["summary"]?["errors"]?.intValue, d.errorCount)
        XCTAssertEqual(j["summary"]?["warnings"]?.intValue, d.warningCount)
        let f = try XCTUnwrap(j["findings"]?.arrayValue?.first)
        for key in ["severity", "code", "function", "op", "binding", "bindings", "shapes", "message", "fix"] {
            XCTAssertNotNil(f[key], key)
        }
        XCTAssertEqual(f["fix"]?["pass"]?.stringValue, "lower_slice_update")
        XCTAssertEqual(f["fix"]?["available"], .bool(true))
        let sym = try XCTUnwrap(j["functions"]?.arrayValue?.first?["symbols"]?.arrayValue?.first)
        XCTAssertEqual(sym["constraint"]?.stringValue, "RangeDim(1..64)")
    }
}
