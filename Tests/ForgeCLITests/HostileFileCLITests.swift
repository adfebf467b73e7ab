import Foundation
import XCTest

/// Hostile `--messages` and `--contract` files through the binary: one line naming the file
/// and what it must be, exit 1.
extension CLITests {
    func testABadChatFileIsOneLineNamingTheChatFile() throws {
        let m = try fixture("tiny_llama_int8.mlpackage")
        let qwen3 = try String(contentsOfFile: Self.repoRoot + "/models-ir/chat_templates/Qwen-Qwen3-0.6B.jinja", encoding: .utf8)
        let dir = try tokenizerFolder(template: qwen3, eos: "<|im_end|>")
        let fifo = dir + "/fifo.json"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let cases: [(String, String?, String)] = [
            ("empty.json", "[]", "the chat file must be a non-empty JSON list of {\"role\": …, \"content\": …} objects"),
            ("role.json", #"[{"role": 5, "content": "x"}]"#, "message [0] must be an object with a string \"role\" and a \"content\""),
            ("trunc.json", #"[{"role": "#, "the chat file, line 1: invalid JSON: unexpected end"),
            ("fifo.json", nil, "cannot read the chat file (is a FIFO (named pipe), not a regular file)"),
        ]
        for (name, text, want) in cases {
            if let text { try Data(text.utf8).write(to: URL(fileURLWithPath: dir + "/" + name)) }
            let r = try run(["generate", m, "--tokenizer", dir, "--messages", dir + "/" + name, "--print-prompt"])
            XCTAssertEqual(r.status, 1, r.stderr)
            XCTAssertEqual(r.stderr, "forge-ir: error: \(dir)/\(name): \(want)\n")
        }
    }

    /// `--pass-option .=x` trapped (an empty pass name indexed an empty split); a key no pass
    /// reads (`specialize_sequence.size=1`, a typo) was accepted and ignored.
    func testAPassOptionNoPassReadsIsAUsageError() throws {
        let dir = try tempDir()
        for o in [".=x", "specialize_sequence.size=1", "specialize_sequence=1", "=1"] {
            let r = try run(["optimize", "models-ir/tiny_llama_fp16.mlpackage", "-o", dir + "/o.mlpackage", "--passes", "specialize_sequence", "--pass-option", o])
            XCTAssertEqual(r.status, 64, o + ": " + r.stderr)
            XCTAssertTrue(r.stderr.hasPrefix("forge-ir: error: --pass-option takes <pass>.<key>=<value> (options: specialize_sequence.sizes), got '\(o)'\n"), r.stderr)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/o.mlpackage"))
    }
}
