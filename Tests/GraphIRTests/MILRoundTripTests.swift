import Foundation
import XCTest
@testable import GraphIR
import TestSupport

/// The printer is the parser's inverse: for every model fixture, `parse(print(ir))` is the IR
/// the protobuf loader built (compared with `IREquivalence`: every op, type, attribute,
/// immediate value and blob payload).
final class MILRoundTripTests: XCTestCase {
    /// Every ML Program fixture: the top-level packages and .mlmodel files, and `diag/`.
    static var fixtures: [String] {
        let diag = (try? FileManager.default.contentsOfDirectory(atPath: Fixtures.path("diag"))) ?? []
        return Fixtures.programFixtures + diag.filter { $0.hasSuffix(".mlpackage") }.sorted().map { "diag/" + $0 }
    }

    func testParsePrintIsIdentityOnEveryFixture() throws {
        let names = Self.fixtures
        XCTAssertGreaterThanOrEqual(names.count, 20)
        for name in names {
            let path = Fixtures.path(name)
            let original = try ModelLoader.load(path: path)
            let text = MILPrinter.print(original, elideAbove: Int.max)
            let modelDir = name.hasSuffix(".mlpackage") ? path + "/Data/com.apple.CoreML" : (path as NSString).deletingLastPathComponent
            let parsed = try MILTextParser.parse(text, file: name + " (printed)", modelDirectory: modelDir)
            var notes: [String] = []
            _ = CompiledModelLoader.takeFlexibleShapeInformation(parsed.program, notes: &notes)
            XCTAssertEqual(notes, [], name)
            CompiledModelLoader.bindFlexibleDims(parsed.program, original.description)
            let copy = Model(specificationVersion: original.specificationVersion, description: original.description,
                             isUpdatable: original.isUpdatable, program: parsed.program, weightFiles: parsed.weightFiles)
            XCTAssertNoThrow(try Verifier.verify(copy, path: name), name)
            XCTAssertEqual(IREquivalence.differences(original, copy), [], name)
            // Printing the parsed IR gives the same text again.
            XCTAssertEqual(MILPrinter.print(copy, elideAbove: Int.max), text, name)
        }
    }
}
