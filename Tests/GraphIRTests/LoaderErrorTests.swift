import Foundation
import TestSupport
import XCTest
@testable import GraphIR

/// Every failure the loader must report with a typed error naming the file.
final class LoaderErrorTests: XCTestCase {
    func expectError(_ path: String, file: StaticString = #filePath, line: UInt = #line, _ check: (ModelError) -> Bool) {
        do {
            _ = try ModelLoader.load(path: path)
            XCTFail("loading \(path) succeeded, expected an error", file: file, line: line)
        } catch let e as ModelError {
            XCTAssertTrue(check(e), "unexpected error: \(e)", file: file, line: line)
        } catch {
            XCTFail("untyped error \(error)", file: file, line: line)
        }
    }

    func testMissingPath() {
        expectError("/nonexistent/model.mlpackage") { if case .fileNotFound = $0 { return true }; return false }
    }

    func testFolderWithoutManifest() throws {
        let dir = try Fixtures.tempDir(self)
        expectError(dir) { if case .unsupportedFormat = $0 { return true }; return false }
    }

    func testManifestNotJSON() throws {
        let pkg = try Fixtures.copy("tiny_llama_int8.mlpackage", into: self)
        try Data("{not json".utf8).write(to: URL(fileURLWithPath: pkg + "/Manifest.json"))
        expectError(pkg) { if case .badManifest = $0 { return true }; return false }
    }

    /// A truncated Manifest.json says where the JSON breaks (it said only "not a JSON object").
    func testTruncatedManifestNamesTheParseError() throws {
        let pkg = try Fixtures.copy("tiny_llama_int8.mlpackage", into: self)
        try Data(#"{"rootModelIdentifier": "X", "itemInfoEntries": {"#.utf8).write(to: URL(fileURLWithPath: pkg + "/Manifest.json"))
        expectError(pkg) { e in
            if case let .badManifest(_, reason) = e { return reason == "not valid JSON: line 1 (byte 49): expected key" }
            return false
        }
    }

    func testManifestRootMissing() throws {
        let pkg = try Fixtures.copy("tiny_llama_int8.mlpackage", into: self)
        try Data(#"{"fileFormatVersion": "1.0.0", "itemInfoEntries": {}, "rootModelIdentifier": "X"}"#.utf8)
            .write(to: URL(fileURLWithPath: pkg + "/Manifest.json"))
        expectError(pkg) { e in
            if case let .badManifest(_, reason) = e { return reason.contains("X") }
            return false
        }
    }

    func testGarbageProtobuf() throws {
        let dir = try Fixtures.tempDir(self)
        let p = dir + "/junk.mlmodel"
        try Data([0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x12, 0x34]).write(to: URL(fileURLWithPath: p))
        expectError(p) { if case .malformedProtobuf(let path) = $0 { return path == p }; return false }
    }

    func testEmptyFile() throws {
        let dir = try Fixtures.tempDir(self)
        let p = dir + "/empty.mlmodel"
        XCTAssertTrue(FileManager.default.createFile(atPath: p, contents: Data()))
        expectError(p) { if case .malformedProtobuf = $0 { return true }; return false }
    }

    func testNotMLProgramNamesTheKind() throws {
        let p = try Fixtures.requireFixture("not_mlprogram.mlmodel")
        expectError(p) { e in
            if case let .notMLProgram(path, kind) = e { return path == p && kind == "neuralNetwork" }
            return false
        }
        // The message a user sees names the file, the kind, and that it is unsupported.
        do { _ = try ModelLoader.load(path: p) } catch {
            let text = "\(error)"
            XCTAssertTrue(text.contains("neuralNetwork") && text.contains("not supported") && text.contains(p), text)
        }
    }

    func testMissingWeightFile() throws {
        let pkg = try Fixtures.copy("tiny_llama_int8.mlpackage", into: self)
        try FileManager.default.removeItem(atPath: pkg + Fixtures.weightSubpath)
        expectError(pkg) { e in
            if case let .missingWeightFile(path) = e { return path.hasSuffix("weights/weight.bin") }
            return false
        }
    }

    func testBadSentinel() throws {
        let pkg = try Fixtures.copy("tiny_llama_int8.mlpackage", into: self)
        let w = pkg + Fixtures.weightSubpath
        var bytes = try Data(contentsOf: URL(fileURLWithPath: w))
        bytes[64] ^= 0xFF  // first record's sentinel
        try bytes.write(to: URL(fileURLWithPath: w))
        expectError(pkg) { e in
            if case let .badBlob(_, offset, reason) = e { return offset == 64 && reason.contains("sentinel") }
            return false
        }
    }

    func testTruncatedWeightFile() throws {
        let pkg = try Fixtures.copy("tiny_llama_int8.mlpackage", into: self)
        let w = pkg + Fixtures.weightSubpath
        let bytes = try Data(contentsOf: URL(fileURLWithPath: w))
        try bytes.prefix(bytes.count / 2).write(to: URL(fileURLWithPath: w))
        expectError(pkg) { e in
            if case let .badBlob(_, _, reason) = e { return reason.contains("outside") }
            return false
        }
    }

    func testWrongBlobVersion() throws {
        let pkg = try Fixtures.copy("tiny_llama_int8.mlpackage", into: self)
        let w = pkg + Fixtures.weightSubpath
        var bytes = try Data(contentsOf: URL(fileURLWithPath: w))
        bytes[4] = 1
        try bytes.write(to: URL(fileURLWithPath: w))
        expectError(pkg) { e in
            if case let .badWeightFile(_, reason) = e { return reason.contains("version 1") }
            return false
        }
    }

    func testBlobDtypeMismatch() throws {
        let pkg = try Fixtures.copy("tiny_llama_int8.mlpackage", into: self)
        let w = pkg + Fixtures.weightSubpath
        var bytes = try Data(contentsOf: URL(fileURLWithPath: w))
        // Change the first record's dtype code to one that exists but differs (uint16 = 7).
        bytes[68] = 7
        try bytes.write(to: URL(fileURLWithPath: w))
        expectError(pkg) { e in
            if case let .badBlob(_, offset, reason) = e { return offset == 64 && reason.contains("uint16") }
            return false
        }
    }

    func testTruncatedSpec() throws {
        let pkg = try Fixtures.copy("tiny_llama_int8.mlpackage", into: self)
        let s = pkg + Fixtures.specSubpath
        let bytes = try Data(contentsOf: URL(fileURLWithPath: s))
        try bytes.prefix(bytes.count - 7).write(to: URL(fileURLWithPath: s))
        expectError(pkg) { if case .malformedProtobuf = $0 { return true }; return false }
    }

    func testUndefinedValue() throws {
        let p = try Fixtures.requireFixture("bad_undefined_value.mlmodel")
        expectError(p) { e in
            if case let .invalidProgram(path, context, reason) = e {
                return path == p && context.contains("'b'") && context.contains("mul") && reason.contains("undefined value 'nope'")
            }
            return false
        }
    }

    func testCycle() throws {
        let p = try Fixtures.requireFixture("bad_cycle.mlmodel")
        expectError(p) { e in
            if case let .invalidProgram(_, context, reason) = e {
                return context.contains("'a'") && reason.contains("before its definition")
            }
            return false
        }
    }

    func testUnknownDType() throws {
        let p = try Fixtures.requireFixture("bad_unknown_dtype.mlmodel")
        expectError(p) { e in
            if case let .unknownDType(path, context, code) = e { return path == p && code == 99 && context.contains("'c'") }
            return false
        }
    }
}
