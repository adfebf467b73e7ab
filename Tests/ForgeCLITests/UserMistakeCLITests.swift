import Foundation
import TestSupport
import XCTest

/// Mistakes a new user makes, each answered by one clear line and a non-zero exit.
extension CLITests {
    func assertOneLineError(_ args: [String], status: Int32, contains text: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let r = try run(args)
        XCTAssertEqual(r.status, status, r.stderr, file: file, line: line)
        let first = r.stderr.split(separator: "\n").first.map(String.init) ?? ""
        XCTAssertTrue(first.hasPrefix("forge-ir: error: ") && first.contains(text), "got: \(r.stderr)", file: file, line: line)
        XCTAssertEqual(r.stdout, "", file: file, line: line)
    }

    func testPromptIDsOutsideTheVocabulary() throws {
        // The real SmolLM2 tokenizer gives ids up to 49151; the twin keeps the first 8192.
        try assertOneLineError(["generate", try fixture("smollm2_twin_int8.mlpackage"), "--prompt-ids", "1,2,9690"],
                               status: 1, contains: "token id 9690 is outside the model's vocabulary (0..<8192")
        try assertOneLineError(["diagnose", try fixture("smollm2_twin_int8.mlpackage"), "--dynamic", "--prompt-ids", "1,99999"],
                               status: 1, contains: "token id 99999 is outside the vocabulary")
    }

    func testListPassesNeedsNoModel() throws {
        let r = try run(["optimize", "--list-passes"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("lower_slice_update"), r.stdout)
        XCTAssertTrue(r.stdout.contains("pipelines:"), r.stdout)
    }

    func testRunFolderMistakes() throws {
        let m = try fixture("tiny_llama_fp16.mlpackage")
        let inputs = try fixture("inputs/tiny_llama_fp16.npz")
        let empty = try tempDir()
        try assertOneLineError(["run", m, "--inputs", inputs, "--state-in", empty], status: 1, contains: "holds none of the state files")
        try assertOneLineError(["run", m, "--inputs", inputs, "--out", "README.md"], status: 64, contains: "--out README.md is a file")
        try assertOneLineError(["run", m, "--inputs", inputs, "--state-out", "README.md"], status: 64, contains: "--state-out README.md is a file")
    }

    func testOptimizeOutputMustBeAPackage() throws {
        let out = try tempDir() + "/x.mlmodel"
        try assertOneLineError(["optimize", try fixture("tiny_inline.mlmodel"), "-o", out], status: 64, contains: "name it <name>.mlpackage")
        XCTAssertFalse(FileManager.default.fileExists(atPath: out))
    }

    func testSamplingOptionsAreChecked() throws {
        let m = try fixture("tiny_llama_int8.mlpackage")
        try assertOneLineError(["generate", m, "--prompt-ids", "1", "--temperature", "-1"], status: 64, contains: "--temperature must be ≥ 0")
        try assertOneLineError(["generate", m, "--prompt-ids", "1", "--top-p", "2"], status: 64, contains: "--top-p must be in (0, 1]")
        try assertOneLineError(["generate", m, "--prompt-ids", "1", "--template", "chatml"], status: 64, contains: "--template applies to --chat and --messages only")
    }

    func testContextFullIsSaid() throws {
        let r = try run(["generate", try fixture("tiny_llama_int8.mlpackage"), "--prompt-ids", "1,2,3", "--max-tokens", "100"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stderr.contains("stopped: the model's context (64 tokens) is full"), r.stderr)
    }
}
