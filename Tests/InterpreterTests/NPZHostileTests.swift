import Foundation
import GraphIR
@testable import Interpreter
import TestSupport
import XCTest

/// The `.npz` / `.npy` reader on the hostile archives of `models-ir/hostile/` (written by
/// tools/make_hostile_fixtures.py): typed errors naming the member, never a trap or an
/// allocation the file cannot justify.
final class NPZHostileTests: XCTestCase {
    static let dir = Fixtures.repoRoot + "/models-ir/hostile/"

    func data(_ name: String) throws -> Data {
        guard let d = FileManager.default.contents(atPath: Self.dir + name) else { throw XCTSkip("\(name) missing") }
        return d
    }

    func testZipEdgeCasesNameTheMember() throws {
        for name in ["npz_zip64_extra_empty_at_eof.npz", "npz_zip64_extra_short_at_eof.npz", "npz_extra_past_eof.npz"] {
            XCTAssertThrowsError(try NPZ.decode(try data(name), name: name)) { e in
                XCTAssertTrue("\(e)".contains("member 'x.npy'"), "\(name): \(e)")
            }
        }
    }

    func testDeclaredSizesCappedByTheFile() throws {
        XCTAssertThrowsError(try NPZ.decode(try data("npz_declares_4gib.npz"), name: "a")) { e in
            XCTAssertTrue("\(e)".contains("more than its"), "\(e)")
        }
        XCTAssertThrowsError(try NPZ.decode(try data("npz_bomb_lies.npz"), name: "b")) { e in
            XCTAssertTrue("\(e)".contains("more than the 1000 bytes it declares"), "\(e)")
        }
        let saved = MemoryBudget.limit
        defer { MemoryBudget.limit = saved }
        MemoryBudget.limit = 16 << 20
        XCTAssertThrowsError(try NPZ.decode(try data("npz_deflate_bomb.npz"), name: "c")) { e in
            XCTAssertTrue("\(e)".contains("memory budget"), "\(e)")
        }
        XCTAssertThrowsError(try NPY.decode(try data("npy_huge_shape.npy"), name: "d"))
    }

    /// Conversions for a model input's dtype: fp64 → fp16 rounded directly (numpy:
    /// float16(1 + 2^-11 + 2^-40) = 1 + 2^-10; through fp32 it would be 1.0); int64 beyond
    /// int32 refused unless allowed.
    func testConversionsForTheInputDType() throws {
        let x = try NPY.decode(try data("inputs/x_fp64.npy"), name: "x", target: .fp16)
        XCTAssertEqual(x.dtype, .fp16)
        XCTAssertEqual(x.floats[0], 1 + 1.0 / 1024)
        XCTAssertThrowsError(try NPY.decode(try data("inputs/i_int64_big.npy"), name: "i", target: .int32)) { e in
            XCTAssertTrue("\(e)".contains("--allow-lossy-inputs"), "\(e)")
        }
        var warnings: [String] = []
        let i = try NPY.decode(try data("inputs/i_int64_big.npy"), name: "i", target: .int32, allowLossy: true) { warnings.append($0) }
        XCTAssertEqual(i.ints, [Int32.max, 5])
        XCTAssertEqual(warnings.count, 1)
        XCTAssertEqual(try NPY.decode(try data("inputs/i_int64_small.npy"), name: "i", target: .int32).ints, [5, -7])
    }
}
