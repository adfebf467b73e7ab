import Foundation
import JSON
import XCTest

/// `generate` with chat templates: the tokenizer's own template from its tokenizer_config.json,
/// `--template` overrides, `--messages`, `--print-prompt`; expected prompts are transformers'
/// renderings (models-ir/chat_templates/vectors.json).
extension CLITests {
    /// transformers' rendering of `file` for the recorded message list `index` with
    /// add_generation_prompt and no options.
    func recordedPrompt(_ file: String, messages: [[String: String]]) throws -> String {
        let data = try Data(contentsOf: URL(fileURLWithPath: Self.repoRoot + "/models-ir/chat_templates/vectors.json"))
        let v = try JSONSerialization.jsonObject(with: data) as! [String: Any]
        let cases = ((v["templates"] as! [String: Any])[file] as! [String: Any])["cases"] as! [[String: Any]]
        let c = try XCTUnwrap(cases.first {
            ($0["messages"] as! [[String: String]]) == messages && $0["add_generation_prompt"] as! Bool
                && ($0["options"] as! [String: Any]).isEmpty
        })
        return c["text"] as! String
    }

    /// A tokenizer folder: tokenizer.json plus a tokenizer_config.json holding `template`.
    func tokenizerFolder(template: String, eos: String) throws -> String {
        let dir = try tempDir()
        try FileManager.default.copyItem(atPath: Self.repoRoot + "/models-ir/tokenizers/tiny_qwen2_style.json", toPath: dir + "/tokenizer.json")
        let config: [String: Any] = ["chat_template": template, "eos_token": eos, "bos_token": NSNull()]
        try JSONSerialization.data(withJSONObject: config).write(to: URL(fileURLWithPath: dir + "/tokenizer_config.json"))
        return dir
    }

    func testPrintPromptRendersTheTokenizersOwnTemplate() throws {
        let m = try fixture("tiny_llama_int8.mlpackage")
        let qwen3 = try String(contentsOfFile: Self.repoRoot + "/models-ir/chat_templates/Qwen-Qwen3-0.6B.jinja", encoding: .utf8)
        let dir = try tokenizerFolder(template: qwen3, eos: "<|im_end|>")
        let messages = [["role": "system", "content": "  Be brief.\n"], ["role": "user", "content": "What's 2+2?"],
                        ["role": "assistant", "content": "4"], ["role": "user", "content": "  And 3+3? \n"]]
        let file = dir + "/chat.json"
        try JSONSerialization.data(withJSONObject: messages).write(to: URL(fileURLWithPath: file))
        let r = try run(["generate", m, "--tokenizer", dir, "--messages", file, "--print-prompt"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout, try recordedPrompt("Qwen-Qwen3-0.6B.jinja", messages: messages))

        // --json: the template's name and stop ids; a built-in --template overrides the config's
        let j = try run(["generate", m, "--tokenizer", dir + "/tokenizer.json", "--chat", "What is the capital of France?",
                         "--print-prompt", "--json", "--template", "chatml"])
        XCTAssertEqual(j.status, 0, j.stderr)
        let obj = try JSONSerialization.jsonObject(with: Data(j.stdout.utf8)) as! [String: Any]
        XCTAssertEqual(obj["template"] as? String, "chatml")
        XCTAssertEqual(obj["prompt"] as? String, try recordedPrompt("forge-ir-chatml.jinja", messages: [["role": "user", "content": "What is the capital of France?"]]))
        XCTAssertFalse((obj["stop_ids"] as! [Int]).isEmpty)

        // a .jinja file as --template
        let g = try run(["generate", m, "--tokenizer", dir, "--chat", "Hi!", "--system", "You are terse.", "--print-prompt",
                         "--template", "models-ir/chat_templates/microsoft-Phi-3.5-mini-instruct.jinja"])
        XCTAssertEqual(g.status, 0, g.stderr)
        XCTAssertEqual(g.stdout, "<|system|>\nYou are terse.<|end|>\n<|user|>\nHi!<|end|>\n<|assistant|>\n")
    }

    func testChatTemplateMistakes() throws {
        let m = try fixture("tiny_llama_int8.mlpackage")
        let gpt2 = "models-ir/tokenizers/tiny_gpt2_style.json"
        try assertOneLineError(["generate", m, "--tokenizer", gpt2, "--chat", "Hi"], status: 64, contains: "no chat template")
        try assertOneLineError(["generate", m, "--tokenizer", gpt2, "--chat", "Hi", "--template", "nope"], status: 64,
                               contains: "unknown chat template 'nope'")
        try assertOneLineError(["generate", m, "--tokenizer", gpt2, "--chat", "Hi", "--system", "s", "--template",
                                "models-ir/chat_templates/google-gemma-2-2b-it.jinja"], status: 1,
                               contains: "chat template google-gemma-2-2b-it.jinja line 1: the template refused the messages: System role not supported")
        let dir = try tokenizerFolder(template: "{% for m in messages %}\n{{ m.content + 1 }}{% endfor %}", eos: "<|im_end|>")
        try assertOneLineError(["generate", m, "--tokenizer", dir, "--chat", "Hi"], status: 1, contains: "chat template tokenizer_config.json line 2:")
        let bad = try tempDir() + "/bad.json"
        try Data("[{\"role\": \"user\"}]".utf8).write(to: URL(fileURLWithPath: bad))
        try assertOneLineError(["generate", m, "--tokenizer", gpt2, "--messages", bad, "--template", "chatml"], status: 1,
                               contains: "a string \"role\" and a \"content\"")
        try assertOneLineError(["generate", m, "--tokenizer", gpt2, "--chat", "Hi", "--template", "chatml", "--template-var", "x"],
                               status: 64, contains: "--template-var takes key=value")
    }
}
