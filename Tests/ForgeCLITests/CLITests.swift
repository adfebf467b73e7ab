import Foundation
import GraphIR
import JSON
import TestSupport
import XCTest

/// Runs the built `forge-ir` binary and compares exit code, stdout and stderr with snapshots.
///
/// Text snapshots live in `Tests/ForgeCLITests/Snapshots/`; run with
/// `FORGE_IR_UPDATE_SNAPSHOTS=1` to rewrite them after an intended change (then review the diff).
final class CLITests: XCTestCase {
    static var repoRoot: String { Fixtures.repoRoot }

    static let snapshotDir = repoRoot + "/Tests/ForgeCLITests/Snapshots"

    /// The `forge-ir` executable next to the test bundle (the products directory), or
    /// `$FORGE_IR_BIN`.
    static let binary: String? = {
        let fm = FileManager.default
        if let env = ProcessInfo.processInfo.environment["FORGE_IR_BIN"], fm.isExecutableFile(atPath: env) { return env }
        var dirs: [URL] = [Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent()]
        for b in Bundle.allBundles where b.bundlePath.hasSuffix(".xctest") { dirs.append(b.bundleURL.deletingLastPathComponent()) }
        if let arg0 = CommandLine.arguments.first { dirs.append(URL(fileURLWithPath: arg0).deletingLastPathComponent()) }
        for d in dirs {
            let p = d.appendingPathComponent("forge-ir").path
            if fm.isExecutableFile(atPath: p) { return p }
        }
        return nil
    }()

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    func run(_ args: [String]) throws -> Result {
        guard let bin = Self.binary else { throw XCTSkip("forge-ir binary not found next to the test bundle; set FORGE_IR_BIN") }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: bin)
        p.arguments = args
        p.currentDirectoryURL = URL(fileURLWithPath: Self.repoRoot)
        // stdout through a pipe, stderr through a file (no second reader thread needed).
        let out = Pipe()
        let errPath = NSTemporaryDirectory() + "forge-ir-cli-" + UUID().uuidString + ".err"
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: errPath) }
        let errHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        p.standardOutput = out
        p.standardError = errHandle
        try p.run()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        try errHandle.close()
        let errData = FileManager.default.contents(atPath: errPath) ?? Data()
        XCTAssertEqual(p.terminationReason, .exit, "forge-ir \(args) died of a signal")
        return Result(status: p.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                      stderr: String(decoding: errData, as: UTF8.self))
    }

    func fixture(_ name: String) throws -> String {
        let rel = "models-ir/" + name
        guard FileManager.default.fileExists(atPath: Self.repoRoot + "/" + rel) else {
            throw XCTSkip("fixture \(rel) missing (tools/make_fixtures.py)")
        }
        return rel
    }

    /// Compares with `Snapshots/<name>`, or writes it when `FORGE_IR_UPDATE_SNAPSHOTS` is set.
    func assertSnapshot(_ text: String, _ name: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let path = Self.snapshotDir + "/" + name
        if ProcessInfo.processInfo.environment["FORGE_IR_UPDATE_SNAPSHOTS"] != nil {
            try FileManager.default.createDirectory(atPath: Self.snapshotDir, withIntermediateDirectories: true)
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            return
        }
        guard let expected = try? String(contentsOfFile: path, encoding: .utf8) else {
            XCTFail("snapshot \(name) missing; run with FORGE_IR_UPDATE_SNAPSHOTS=1", file: file, line: line)
            return
        }
        if text != expected {
            let a = text.split(separator: "\n", omittingEmptySubsequences: false)
            let b = expected.split(separator: "\n", omittingEmptySubsequences: false)
            let i = (0..<min(a.count, b.count)).first { a[$0] != b[$0] } ?? min(a.count, b.count)
            XCTFail("output differs from snapshot \(name) at line \(i + 1):\n  got:      \(i < a.count ? String(a[i]) : "<end>")\n  expected: \(i < b.count ? String(b[i]) : "<end>")", file: file, line: line)
        }
    }

    // MARK: usage errors (64)

    func testNoArguments() throws {
        let r = try run([])
        XCTAssertEqual(r.status, 64)
        XCTAssertEqual(r.stdout, "")
        XCTAssertEqual(r.stderr, """
        USAGE: forge-ir <verb> [<arguments>] [<options>]
        forge-ir: error: no verb given
        Run 'forge-ir --help' for the list of verbs.

        """)
    }

    func testUnknownVerb() throws {
        let r = try run(["frobnicate", "x"])
        XCTAssertEqual(r.status, 64)
        XCTAssertEqual(r.stdout, "")
        XCTAssertEqual(r.stderr, "forge-ir: error: unknown verb 'frobnicate'\nRun 'forge-ir --help' for the list of verbs.\n")
    }

    func testUnknownTopLevelOption() throws {
        let r = try run(["--frob"])
        XCTAssertEqual(r.status, 64)
        XCTAssertEqual(r.stderr, "forge-ir: error: unknown option '--frob'\nRun 'forge-ir --help' for the list of verbs.\n")
    }

    func testUnknownFlag() throws {
        let r = try run(["dump", "--frob", "models-ir/tiny_inline.mlmodel"])
        XCTAssertEqual(r.status, 64)
        XCTAssertEqual(r.stdout, "")
        XCTAssertEqual(r.stderr, "forge-ir: error: unknown option '--frob'\nRun 'forge-ir dump --help' for usage.\n")
    }

    func testArgumentErrors() throws {
        var r = try run(["dump"])
        XCTAssertEqual(r.status, 64)
        XCTAssertEqual(r.stderr, "forge-ir: error: missing argument <model>\nRun 'forge-ir dump --help' for usage.\n")
        r = try run(["dump", "a", "b"])
        XCTAssertEqual(r.status, 64)
        XCTAssertEqual(r.stderr, "forge-ir: error: unexpected argument 'b'\nRun 'forge-ir dump --help' for usage.\n")
        r = try run(["dump", "a", "--function"])
        XCTAssertEqual(r.status, 64)
        XCTAssertEqual(r.stderr, "forge-ir: error: option '--function' needs a value <name>\nRun 'forge-ir dump --help' for usage.\n")
        r = try run(["dump", "a", "--json=yes"])
        XCTAssertEqual(r.status, 64)
        XCTAssertEqual(r.stderr, "forge-ir: error: option '--json' does not take a value\nRun 'forge-ir dump --help' for usage.\n")
    }

    // MARK: failures (1)

    func testMissingFile() throws {
        let r = try run(["dump", "models-ir/no_such_model.mlpackage"])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stdout, "")
        XCTAssertEqual(r.stderr, "forge-ir: error: models-ir/no_such_model.mlpackage: no such file or folder\n")
    }

    func testNotAnMLProgram() throws {
        let model = try fixture("not_mlprogram.mlmodel")
        let r = try run(["dump", model])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stdout, "")
        XCTAssertEqual(r.stderr, "forge-ir: error: models-ir/not_mlprogram.mlmodel: model type 'neuralNetwork' is not supported: forge-ir reads ML Program (mlProgram) models only; convert the source model again with coremltools' ct.convert(..., convert_to=\"mlprogram\")\n")
    }

    func testInvalidProgramIsOneLine() throws {
        let model = try fixture("bad_undefined_value.mlmodel")
        let r = try run(["dump", model])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stdout, "")
        XCTAssertTrue(r.stderr.hasPrefix("forge-ir: error: models-ir/bad_undefined_value.mlmodel"), r.stderr)
        XCTAssertEqual(r.stderr.filter { $0 == "\n" }.count, 1)
    }

    func testUnknownFunction() throws {
        let model = try fixture("multifunction.mlpackage")
        let r = try run(["dump", model, "--function", "nope"])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "forge-ir: error: models-ir/multifunction.mlpackage: no function 'nope'; the model has: decode, prefill\n")
    }

    // MARK: help, version

    func testHelp() throws {
        let r = try run(["--help"])
        XCTAssertEqual(r.status, 0)
        XCTAssertEqual(r.stderr, "")
        try assertSnapshot(r.stdout, "help.txt")
        let d = try run(["dump", "--help"])
        XCTAssertEqual(d.status, 0)
        try assertSnapshot(d.stdout, "dump-help.txt")
        // --help wins over other errors.
        XCTAssertEqual(try run(["dump", "--frob", "-h"]).status, 0)
        XCTAssertEqual(try run(["help", "dump"]).stdout, d.stdout)
    }

    func testVersion() throws {
        let r = try run(["--version"])
        XCTAssertEqual(r.status, 0)
        XCTAssertTrue(r.stdout.hasPrefix("forge-ir "))
    }

    // MARK: dump

    func testDumpTinyInline() throws {
        let model = try fixture("tiny_inline.mlmodel")
        let r = try run(["dump", model])
        XCTAssertEqual(r.status, 0)
        XCTAssertEqual(r.stderr, "")
        try assertSnapshot(r.stdout, "dump-tiny_inline.txt")
    }

    func testDumpSummary() throws {
        let model = try fixture("tiny_llama_int8.mlpackage")
        let r = try run(["dump", model, "--summary"])
        XCTAssertEqual(r.status, 0)
        XCTAssertEqual(r.stderr, "")
        XCTAssertFalse(r.stdout.contains("program("))
        try assertSnapshot(r.stdout, "dump-summary-tiny_llama_int8.txt")
    }

    func testDumpDescriptionLines() throws {
        let r = try run(["dump", try fixture("enumerated_shapes.mlpackage")])
        XCTAssertEqual(r.status, 0)
        XCTAssertTrue(r.stdout.contains("\n    input_ids: int32 EnumeratedShapes([1,16],[1,1],[1,32]) default [1,16]\n"), r.stdout)
        let s = try run(["dump", try fixture("tiny_llama_fp16.mlpackage")])
        XCTAssertTrue(s.stdout.contains("\n    input_ids: int32 [1, RangeDim(1..64)]\n"))
        XCTAssertTrue(s.stdout.contains("\n    key_cache_0: fp16 [1, 2, 64, 16] (state, 4096 bytes)\n"))
        XCTAssertTrue(s.stdout.contains("[FlexibleShapeInformation = "))
        XCTAssertTrue(s.stdout.hasSuffix("        } -> (logits);\n}\n"))
    }

    func testDumpOneFunction() throws {
        let model = try fixture("multifunction.mlpackage")
        let r = try run(["dump", model, "--function=decode"])
        XCTAssertEqual(r.status, 0)
        XCTAssertTrue(r.stdout.contains("    func decode<ios18>("))
        XCTAssertFalse(r.stdout.contains("func prefill"))
        XCTAssertFalse(r.stdout.contains("function prefill"))
    }

    func testDumpJSONMatchesReference() throws {
        let dir = Self.repoRoot + "/models-ir"
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [])
            .filter { ($0.hasSuffix(".mlpackage") || $0.hasSuffix(".mlmodel")) && $0 != "not_mlprogram.mlmodel" && !$0.hasPrefix("bad_") }
            .sorted()
        if names.isEmpty { throw XCTSkip("no fixtures in models-ir") }
        var compared = 0
        for name in names {
            let base = (name as NSString).deletingPathExtension
            let refPath = dir + "/reference/" + base + ".json"
            guard let refText = try? String(contentsOfFile: refPath, encoding: .utf8) else {
                XCTFail("no reference JSON for \(name)")
                continue
            }
            let r = try run(["dump", "--json", "models-ir/" + name])
            XCTAssertEqual(r.status, 0, "\(name): \(r.stderr)")
            let got = try JSONValue.parse(r.stdout)
            let expected = try JSONValue.parse(refText)
            for d in Self.differences(got, expected, path: base) { XCTFail(d) }
            compared += 1
        }
        XCTAssertGreaterThan(compared, 0)
    }

    func testSummaryJSON() throws {
        let model = try fixture("tiny_llama_fp16.mlpackage")
        let r = try run(["dump", model, "--summary", "--json"])
        XCTAssertEqual(r.status, 0)
        let j = try JSONValue.parse(r.stdout)
        guard let s = j["summary"], let f = s["functions"]?.arrayValue?.first else { return XCTFail("no summary") }
        XCTAssertEqual(f["state_count"], .int(4))
        XCTAssertEqual(f["state_bytes"], .int(4 * 4096))
        XCTAssertEqual(f["op_counts"], j["functions"]?.arrayValue?.first?["op_counts"])
        XCTAssertEqual(s["weight_file_bytes"], j["weight_file_bytes"])
    }

    /// `forge-ir dump … | head` must end quietly when the reader goes away (exit 0, nothing on stderr).
    func testBrokenPipe() throws {
        guard let bin = Self.binary else { throw XCTSkip("no binary") }
        guard FileManager.default.isExecutableFile(atPath: "/bin/bash") else { throw XCTSkip("no bash") }
        let model = try fixture("tiny_llama_fp16.mlpackage")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/bash")
        // The reader (`true`) is gone before forge-ir writes, so the write fails with EPIPE.
        let err = "/tmp/forge-ir-epipe-$$.err"
        p.arguments = ["-c", "{ sleep 0.3; '\(bin)' dump '\(model)' 2>\(err); } | true; s=${PIPESTATUS[0]}; cat \(err); rm -f \(err); echo \"status=$s\""]
        p.currentDirectoryURL = URL(fileURLWithPath: Self.repoRoot)
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        XCTAssertEqual(text, "status=0\n")
    }

    /// Human-readable differences between two JSON values (empty when equal).
    static func differences(_ a: JSONValue, _ b: JSONValue, path: String) -> [String] {
        switch (a, b) {
        case let (.object(x), .object(y)):
            var out: [String] = []
            for k in Set(x.keys).union(y.keys).sorted() {
                switch (x[k], y[k]) {
                case let (v?, w?): out += differences(v, w, path: path + "." + k)
                case (nil, _?): out.append("\(path).\(k): missing in forge-ir output")
                case (_?, nil): out.append("\(path).\(k): not in the reference")
                default: break
                }
            }
            return out
        case let (.array(x), .array(y)) where x.count == y.count:
            return zip(x, y).enumerated().flatMap { differences($1.0, $1.1, path: "\(path)[\($0)]") }
        default:
            return a == b ? [] : ["\(path): got \(a.render(pretty: false)), reference \(b.render(pretty: false))"]
        }
    }
}
