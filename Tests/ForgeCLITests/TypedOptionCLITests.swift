import Foundation
import TestSupport
import XCTest

/// Options are declared once per verb with their value type: values are checked while parsing
/// (exit 64 naming the option), and mistyped names get a did-you-mean.
extension CLITests {
    func testMistypedNamesGetSuggestions() throws {
        let model = try fixture("tiny_llama_fp16.mlpackage")
        let option = try run(["run", model, "--precison", "fp16"])
        XCTAssertEqual(option.status, 64)
        XCTAssertTrue(option.stderr.contains("unknown option '--precison' (did you mean '--precision'?)"), option.stderr)
        let verb = try run(["dupm", model])
        XCTAssertEqual(verb.status, 64)
        XCTAssertTrue(verb.stderr.contains("unknown verb 'dupm' (did you mean 'dump'?)"), verb.stderr)
        let function = try run(["dump", try fixture("multifunction.mlpackage"), "--function", "prefil"])
        XCTAssertEqual(function.status, 1)
        XCTAssertTrue(function.stderr.contains("no function 'prefil' (did you mean 'prefill'?)"), function.stderr)
        let choice = try run(["run", model, "--precision", "fp17"])
        XCTAssertEqual(choice.status, 64)
        XCTAssertTrue(choice.stderr.contains("--precision must be one of fp32, fp16, not 'fp17' (did you mean 'fp16'?)"), choice.stderr)
    }

    func testTypedValuesAreCheckedWhileParsing() throws {
        let model = try fixture("tiny_llama_fp16.mlpackage")
        let cases: [([String], String)] = [
            (["generate", model, "--prompt-ids", "1,2", "--max-tokens", "many"], "--max-tokens takes a whole number ≥ 0, got 'many'"),
            (["generate", model, "--prompt-ids", "1,2", "--top-k", "-1"], "--top-k takes a whole number ≥ 0, got '-1'"),
            (["generate", model, "--prompt-ids", "1,2", "--temperature", "warm"], "--temperature takes a number, got 'warm'"),
            (["run", model, "--threads", "0"], "--threads takes a whole number in 1...256, got '0'"),
            (["bench", model, "-r", "0"], "-r takes a whole number ≥ 1, got '0'"),
        ]
        for (args, message) in cases {
            let r = try run(args)
            XCTAssertEqual(r.status, 64, "\(args): \(r.stderr)")
            XCTAssertTrue(r.stderr.contains(message), "\(args): \(r.stderr)")
            XCTAssertTrue(r.stderr.contains("forge-ir \(args[0]) --help"), "\(args): \(r.stderr)")
        }
    }

    /// `--threads 1` runs without the worker pool; bench reports the threads it used.
    func testThreadsOption() throws {
        let model = try fixture("tiny_llama_fp16.mlpackage")
        let r = try run(["bench", model, "-p", "4", "-n", "2", "-r", "1", "--threads", "1", "--json"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("\"threads\": 1"), r.stdout)
    }
}

extension CLITests {
    /// The bash completion comes from the same declarations: a verb's options and a choice
    /// option's words complete (checked by running the script in bash).
    func testBashCompletionFromDeclarations() throws {
        let r = try run(["completion", "bash"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let dir = NSTemporaryDirectory() + "forge-ir-completion-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try r.stdout.write(toFile: dir + "/c.sh", atomically: true, encoding: .utf8)
        let probe = """
        source \(dir)/c.sh
        COMP_WORDS=(forge-ir generate m --top); COMP_CWORD=3; _forge_ir; echo "${COMPREPLY[*]}"
        COMP_WORDS=(forge-ir run m --precision f); COMP_CWORD=4; _forge_ir; echo "${COMPREPLY[*]}"
        COMP_WORDS=(forge-ir diag); COMP_CWORD=1; _forge_ir; echo "${COMPREPLY[*]}"
        """
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/bash")
        p.arguments = ["-c", probe]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        p.waitUntilExit()
        let lines = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n").map(String.init)
        XCTAssertEqual(lines, ["--top-k --top-p", "fp32 fp16", "diagnose"])
        XCTAssertEqual(try run(["completion", "fish"]).status, 64)
    }
}
