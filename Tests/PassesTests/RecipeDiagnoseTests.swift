import Foundation
import GraphIR
@testable import Passes
import TestSupport
import XCTest

/// The packages made by public recipes (models-ir/recipes/, tools/make_recipe_fixtures.py) are
/// clean: they run under Core ML as published, so `diagnose` gives none of them an error —
/// neither a catalogue error nor a shape error at a binding the model's own contract never
/// produces (Apple's recipe: `END < S`, a negative count of cached tokens).
final class RecipeDiagnoseTests: XCTestCase {
    static let recipes = ["apple_llama31_fp16", "apple_llama31_int4", "explicit_kv", "prefill_decode", "sdpa_seed"]

    func testEveryRecipeFixtureIsInTheList() throws {
        let found = try FileManager.default.contentsOfDirectory(atPath: Fixtures.path("recipes"))
            .filter { $0.hasSuffix(".mlpackage") }.map { String($0.dropLast(".mlpackage".count)) }
        XCTAssertEqual(found.sorted(), Self.recipes)
    }

    func testCleanRecipeFixturesReportNoError() throws {
        for name in Self.recipes {
            let model = try ModelLoader.load(path: Fixtures.path("recipes/\(name).mlpackage"))
            for seq in [nil, [1, 5, 64]] as [[Int]?] {
                let d = Diagnoser.diagnose(model, options: DiagnoseOptions(seq: seq))
                // `sequence_fixed` answers the --seq request itself (a static prefill_decode
                // function cannot take S = 5), not a fault of the model.
                let errors = d.findings.filter { $0.severity == .error && (seq == nil || $0.code != "sequence_fixed") }.map(\.code)
                XCTAssertEqual(errors, [], "\(name) --seq \(seq.map { "\($0)" } ?? "default"):\n\(d.text(modelPath: name))")
            }
        }
    }

    /// Apple's recipe: the bindings with END < S are not evaluated (and say why); END ≥ S are.
    func testAppleRecipeSkipsBindingsOutsideItsContract() throws {
        let model = try ModelLoader.load(path: Fixtures.path("recipes/apple_llama31_fp16.mlpackage"))
        let d = Diagnoser.diagnose(model)
        let f = try XCTUnwrap(d.functions.first)
        XCTAssertFalse(f.skipped.isEmpty)
        for s in f.skipped {
            XCTAssertLessThan(s.binding["causalMask_3"]!, s.binding["inputIds_1"]!, s.reason)
            XCTAssertTrue(s.reason.contains("causalMask_3 - inputIds_1"), s.reason)
        }
        XCTAssertTrue(f.results.allSatisfy { $0.binding["causalMask_3"]! >= $0.binding["inputIds_1"]! })
        XCTAssertTrue(f.results.contains { $0.binding == ["causalMask_2": 64, "causalMask_3": 64, "inputIds_1": 64] })
        XCTAssertTrue(f.results.allSatisfy { $0.error == nil }, d.text(modelPath: "apple"))
    }

    /// A state write at MIL's negative indexing (begin = −S: the last S rows) is not read as a
    /// count of cached tokens: no binding is skipped for it.
    func testNegativeIndexingIsNotAContract() {
        let offsets = [(op: "w", offset: DimExpr(0) - DimExpr.symbol("S"))]
        let r = ContractBindings.filter([["S": 1], ["S": 64]], offsets: offsets)
        XCTAssertEqual(r.keep.count, 2)
        XCTAssertTrue(r.skipped.isEmpty)
        let past = [(op: "w", offset: DimExpr.symbol("END") - DimExpr.symbol("S"))]
        let q = ContractBindings.filter([["S": 1, "END": 1], ["S": 64, "END": 1], ["S": 64, "END": 64]], offsets: past)
        XCTAssertEqual(q.keep, [["S": 1, "END": 1], ["S": 64, "END": 64]])
        XCTAssertEqual(q.skipped.map(\.binding), [["S": 64, "END": 1]])
    }
}

/// One shape format: a shape issue's operands keep their dimensions (ShapeNote), slice bounds
/// and reshape targets their contents.
final class ShapeNoteTests: XCTestCase {
    func testIssueShapesAreStructured() throws {
        let model = try ModelLoader.load(path: Fixtures.path("diag/reshape_s1.mlpackage"))
        let d = Diagnoser.diagnose(model, options: DiagnoseOptions(seq: [1]))
        let f = try XCTUnwrap(d.findings.first { $0.code == "shape_error" }, d.text(modelPath: "reshape_s1"))
        XCTAssertEqual(f.shapes.map(\.text), ["x tensor<fp16, [1, 1, 3]>", "shape tensor<int32, [2]> = [2, -1]"])
        let j = f.shapes[1].json
        XCTAssertEqual(j["value"], .array([.int(2), .int(-1)]))
        XCTAssertEqual(j["shape"], .array([.int(2)]))
        XCTAssertEqual(j["dtype"], .string("int32"))
    }

    func testSymbolicDimensionsAreNullInJSONAndNamedInText() {
        let t = SymTensor(.fp16, [DimExpr(1), .symbol("inputIds_1"), DimExpr(8)])
        let n = ShapeNote("x", t)
        XCTAssertEqual(n.text, "x tensor<fp16, [1, inputIds_1, 8]>")
        XCTAssertEqual(n.json["shape"], .array([.int(1), .null, .int(8)]))
        let unknownRank = ShapeNote("y", SymTensor(.fp32, nil))
        XCTAssertEqual(unknownRank.json["shape"], .null)
        XCTAssertEqual(unknownRank.text, "y tensor<fp32, [?rank]>")
    }
}
