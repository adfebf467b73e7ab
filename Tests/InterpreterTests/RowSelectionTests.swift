import Foundation
import GraphIR
@testable import Interpreter
import TestSupport
import XCTest

/// Selecting one row of the logits: the row equals the torch reference's row (and the full
/// output's), the output has one row, and misuse is refused with a clear error.
final class RowSelectionTests: XCTestCase {
    func testLastRowOfPrefillMatchesTorch() throws {
        for name in ["tiny_llama_fp16", "tiny_llama_int8"] {
            let model = try ModelLoader.load(path: Fixtures.modelsDir + name + ".mlpackage")
            let ref = try NPZ.read(path: Fixtures.modelsDir + "reference/" + name + "_run.npz")
            let want = try XCTUnwrap(ref["call0_logits"])  // [1, 7, vocab] from torch
            let s = want.shape[1], vocab = want.shape[2]
            for row in [0, s - 1] {
                let session = try Session(model: model)
                XCTAssertTrue(session.plan.canSelectRow(of: "logits"))
                try session.plan.selectRow(row, of: "logits")
                let got = try XCTUnwrap(try session.predict(LLMInputs.recorded(ref, call: 0))["logits"])
                XCTAssertEqual(got.shape, [1, 1, vocab], name)
                let wantRow = Array(want.floats[(row * vocab)..<((row + 1) * vocab)])
                let err = zip(got.floats, wantRow).map { abs($0 - $1) }.max() ?? .nan
                XCTAssertLessThanOrEqual(err, 1e-2, "\(name) row \(row): max abs error \(err) vs torch")
                // The states were still written for every row: the next call matches torch.
                try session.plan.selectRow(0, of: "logits")
                let next = try XCTUnwrap(try session.predict(LLMInputs.recorded(ref, call: 1))["logits"])
                XCTAssertEqual(next.shape, [1, 1, vocab])
                let err1 = zip(next.floats, try XCTUnwrap(ref["call1_logits"]).floats).map { abs($0 - $1) }.max() ?? .nan
                XCTAssertLessThanOrEqual(err1, 1e-2, "\(name) decode after a one-row prefill: \(err1)")
            }
        }
    }

    func testFullOutputRestored() throws {
        let model = try ModelLoader.load(path: Fixtures.modelsDir + "tiny_llama_fp16.mlpackage")
        let ref = try NPZ.read(path: Fixtures.modelsDir + "reference/tiny_llama_fp16_run.npz")
        let session = try Session(model: model)
        try session.plan.selectRow(3, of: "logits")
        try session.plan.selectRow(nil, of: "logits")
        let got = try XCTUnwrap(try session.predict(LLMInputs.recorded(ref, call: 0))["logits"])
        XCTAssertEqual(got.shape, try XCTUnwrap(ref["call0_logits"]).shape)
    }

    func testMisuseIsRefused() throws {
        let model = try ModelLoader.load(path: Fixtures.modelsDir + "tiny_llama_fp16.mlpackage")
        let ref = try NPZ.read(path: Fixtures.modelsDir + "reference/tiny_llama_fp16_run.npz")
        let session = try Session(model: model)
        XCTAssertFalse(session.plan.canSelectRow(of: "input_ids"))
        XCTAssertThrowsError(try session.plan.selectRow(0, of: "no_such_output")) { e in
            XCTAssertTrue("\(e)".contains("no_such_output"), "\(e)")
        }
        XCTAssertThrowsError(try session.plan.selectRow(-1, of: "logits"))
        try session.plan.selectRow(7, of: "logits")  // the prefill has rows 0..6
        XCTAssertThrowsError(try session.predict(LLMInputs.recorded(ref, call: 0))) { e in
            XCTAssertTrue("\(e)".contains("row 7"), "\(e)")
        }
    }
}
