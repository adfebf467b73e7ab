import Foundation
import TestSupport
@testable import GraphIR
import TestSupport
import XCTest

/// Loader-level checks of issue #11 that need no CLI: the wire-format nesting bound, checked
/// sizes, and the memory-budget parser.
final class HostileLoaderTests: XCTestCase {
    static let models = Fixtures.repoRoot + "/models-ir/"

    func varint(_ n: Int) -> [UInt8] {
        var n = n, out: [UInt8] = []
        repeat { var b = UInt8(n & 0x7F); n >>= 7; if n > 0 { b |= 0x80 }; out.append(b) } while n > 0
        return out
    }
    func field(_ num: Int, _ payload: [UInt8]) -> [UInt8] { varint(num << 3 | 2) + varint(payload.count) + payload }

    /// Messages nested 201 deep exceed the bound, 200 do not; strings and packed numbers that
    /// do not parse as messages do not count.
    func testWireScanBoundsNesting() {
        func nested(_ depth: Int) -> [UInt8] {
            var m = field(1, Array("leaf".utf8))   // depth 1: a message holding a string
            for _ in 1..<depth { m = field(2, m) }
            return m
        }
        func deep(_ b: [UInt8]) -> Bool { b.withUnsafeBytes { WireScan.exceedsDepth($0) } }
        XCTAssertFalse(deep(nested(WireScan.maxDepth)))
        XCTAssertTrue(deep(nested(WireScan.maxDepth + 2)))
        XCTAssertTrue(deep(nested(5000)))
        XCTAssertFalse(deep([0xFF, 0xFF, 0xFF]))
        XCTAssertFalse(deep([]))
    }

    /// Every committed fixture (real coremltools output) is well within the bound.
    func testWireScanAcceptsEveryFixture() throws {
        let fm = FileManager.default
        var specs = try fm.contentsOfDirectory(atPath: Self.models).filter { $0.hasSuffix(".mlmodel") }.map { Self.models + $0 }
        for p in try fm.contentsOfDirectory(atPath: Self.models) where p.hasSuffix(".mlpackage") {
            specs.append(Self.models + p + "/Data/com.apple.CoreML/model.mlmodel")
        }
        XCTAssertGreaterThan(specs.count, 5)
        for s in specs {
            guard let d = fm.contents(atPath: s) else { continue }
            XCTAssertFalse(d.withUnsafeBytes { WireScan.exceedsDepth($0) }, s)
        }
    }

    func testDeepFixtureRefusedBeforeUnpacking() {
        let p = Self.models + "hostile/deep_cond_5000.mlmodel"
        guard FileManager.default.fileExists(atPath: p) else { return }
        XCTAssertThrowsError(try ModelLoader.load(path: p)) { e in
            XCTAssertEqual(e as? ModelError, .nestingTooDeep(path: p, limit: WireScan.maxDepth))
        }
    }

    func testCheckedSize() {
        XCTAssertEqual(CheckedSize.elementCount([2, 3, 4]), 24)
        XCTAssertEqual(CheckedSize.elementCount([]), 1)
        XCTAssertNil(CheckedSize.elementCount([1 << 32, 1 << 32]))
        XCTAssertNil(CheckedSize.elementCount([Int](repeating: 2, count: 64)))
        XCTAssertNil(CheckedSize.elementCount([-1, 4]))
        XCTAssertEqual(CheckedSize.byteCount(shape: [3], dtype: .int4), 2)
        XCTAssertNil(CheckedSize.byteCount(shape: [1 << 46, 8], dtype: .fp32))
        XCTAssertThrowsError(try CheckedSize.requireElementCount([Int.max, 2], "x"))
    }

    func testMemoryBudgetParse() {
        XCTAssertEqual(MemoryBudget.parse("512M"), 512 << 20)
        XCTAssertEqual(MemoryBudget.parse("4g"), 4 << 30)
        XCTAssertEqual(MemoryBudget.parse("1048576"), 1 << 20)
        XCTAssertNil(MemoryBudget.parse("lots"))
        XCTAssertNil(MemoryBudget.parse("-1"))
        XCTAssertNil(MemoryBudget.parse("99999999999999T"))
        XCTAssertGreaterThanOrEqual(MemoryBudget.defaultLimit, 256 << 20)
    }

    func testDevZeroAndFIFOAreNotRead() throws {
        XCTAssertThrowsError(try ModelLoader.load(path: "/dev/zero")) { e in
            XCTAssertTrue("\(e)".contains("character device"), "\(e)")
        }
        XCTAssertThrowsError(try SafeFile.read("/dev/zero")) { e in
            XCTAssertEqual(e as? SafeFile.Failure, .notRegular(path: "/dev/zero", kind: "a character device"))
        }
    }
}
