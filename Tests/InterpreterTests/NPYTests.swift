import Foundation
import XCTest
@testable import Interpreter
import GraphIR

final class NPYTests: XCTestCase {
    static let root: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()

    /// Reads an archive written by numpy (`np.savez`) in tools/make_fixtures.py.
    func testReadsNumpyArchive() throws {
        let arrays = try NPZ.read(path: NPYTests.root + "/models-ir/reference/tiny_llama_fp16_run.npz")
        let ids = try XCTUnwrap(arrays["call0_input_ids"])
        XCTAssertEqual(ids.dtype, .int32)
        XCTAssertEqual(ids.shape, [1, 7])
        XCTAssertEqual(ids.ints, [17, 200, 3, 99, 42, 128, 7])  // the prompt the generator fixed
        let mask = try XCTUnwrap(arrays["call0_causal_mask"])
        XCTAssertEqual(mask.dtype, .fp16)
        XCTAssertEqual(mask.shape, [1, 1, 7, 64])
        XCTAssertEqual(mask.floats[1], -1e4, accuracy: 4)   // row 0 may not see column 1
        XCTAssertEqual(mask.floats[0], 0)
    }

    func testRoundTripEveryDType() throws {
        let cases: [Tensor] = [
            Tensor(.fp16, shape: [2, 2], floats: [1.5, -2, 65504, 0]),
            Tensor(.fp32, shape: [3], floats: [1e-7, .infinity, -3]),
            Tensor(.int32, shape: [], ints: [7]),
            Tensor(.int8, shape: [2], ints: [-128, 127]),
            Tensor(.uint8, shape: [1, 1], ints: [255]),
            Tensor(shape: [2], bools: [true, false]),
        ]
        for t in cases {
            let back = try NPY.decode(try NPY.encode(t), name: "mem")
            XCTAssertEqual(back.shape, t.shape)
            XCTAssertEqual(back.dtype, t.dtype)
            XCTAssertEqual(back.floats, t.floats)
        }
    }

    func testRejectsGarbage() {
        XCTAssertThrowsError(try NPY.decode(Data([1, 2, 3]), name: "x"))
        XCTAssertThrowsError(try NPZ.read(path: "/nonexistent.npz"))
    }
}
