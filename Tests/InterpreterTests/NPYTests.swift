import Foundation
import TestSupport
import XCTest
@testable import Interpreter
import GraphIR

final class NPYTests: XCTestCase {

    /// Reads an archive written by numpy (`np.savez`) in tools/make_fixtures.py.
    func testReadsNumpyArchive() throws {
        let arrays = try NPZ.read(path: Fixtures.repoRoot + "/models-ir/reference/tiny_llama_fp16_run.npz")
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

    /// Strings (a classifier's label) as NumPy's `<U{n}`: the bytes `np.save` writes for
    /// `np.array(['ab', 'c', 'é'])` and `np.array('class_8')`, decoded and re-encoded identically.
    func testUnicodeStringsMatchNumpyBytes() throws {
        func bytes(_ hex: String) -> Data {
            var d = Data(), i = hex.startIndex
            while i < hex.endIndex { let j = hex.index(i, offsetBy: 2); d.append(UInt8(hex[i..<j], radix: 16)!); i = j }
            return d
        }
        let list = bytes("934e554d5059010076007b276465736372273a20273c5532272c2027666f727472616e5f6f72646572273a2046616c73652c20277368617065273a2028332c292c207d"
                         + String(repeating: "20", count: 60) + "0a61000000620000006300000000000000e900000000000000")
        let scalar = bytes("934e554d5059010076007b276465736372273a20273c5537272c2027666f727472616e5f6f72646572273a2046616c73652c20277368617065273a2028292c207d"
                           + String(repeating: "20", count: 62) + "0a630000006c0000006100000073000000730000005f00000038000000")
        for (data, want, shape) in [(list, ["ab", "c", "é"], [3]), (scalar, ["class_8"], [])] {
            let t = try NPY.decode(data, name: "strings.npy")
            guard case let .string(got) = t.data else { return XCTFail("not strings") }
            XCTAssertEqual(got, want)
            XCTAssertEqual(t.shape, shape)
            XCTAssertEqual(try NPY.encode(t), data)
        }
    }

    func testRejectsGarbage() {
        XCTAssertThrowsError(try NPY.decode(Data([1, 2, 3]), name: "x"))
        XCTAssertThrowsError(try NPZ.read(path: "/nonexistent.npz"))
    }
}

/// The fast fp16 rounding agrees with the exact conversion on every fp16 boundary region.
final class RoundingTests: XCTestCase {
    func testFastHalfRoundingMatchesExactConversion() {
        var rng = SystemRandomNumberGenerator()
        var values: [Float] = [0, -0, 1, -1, 65504, 65519.99, 65520, -65520, 1e-8, -1e-8, 6.1035156e-05, 6.1e-05,
                               5.96e-08, 2.98e-08, .infinity, -.infinity, .nan, 0.1, 1.0009765625, 1.00048828125, 1.000732421875]
        for _ in 0..<100_000 {
            values.append(Float(bitPattern: UInt32.random(in: 0...UInt32.max, using: &rng)))
        }
        var fast = values
        Rounding.toHalf(&fast)
        for (v, f) in zip(values, fast) {
            let exact = Half.toFloat(Half.fromFloat(v))
            if exact.isNaN { XCTAssertTrue(f.isNaN); continue }
            XCTAssertEqual(f.bitPattern, exact.bitPattern, "rounding \(v) (0x\(String(v.bitPattern, radix: 16)))")
        }
    }
}
