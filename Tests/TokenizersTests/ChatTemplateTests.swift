import Foundation
import JSON
import TestSupport
import Tokenizers
import XCTest

/// The Jinja engine and chat templates against transformers 4.44.2 / jinja2 3.1.6:
/// `models-ir/chat_templates/vectors.json` holds real templates' renderings by
/// `apply_chat_template(tokenize=False)`, small engine templates rendered by transformers' own
/// Jinja environment, a tokenizer_config.json with named templates, and a Gemma-4-style
/// tokenizer's prompt ids and a scripted thought-channel generation
/// (tools/make_chat_template_vectors.py writes them).
final class ChatTemplateTests: XCTestCase {
    static let dir = Fixtures.repoRoot + "/models-ir/chat_templates/"

    static let vectors: [String: Any] = {
        let data = try! Data(contentsOf: URL(fileURLWithPath: dir + "vectors.json"))
        return try! JSONSerialization.jsonObject(with: data) as! [String: Any]
    }()

    static func source(_ file: String) throws -> String {
        try String(contentsOfFile: dir + file, encoding: .utf8)
    }

    /// A JSON value as the template sees it, dictionary keys in the file's order.
    /// The same file with object keys in order (messages and contexts: tojson and printing show
    /// the order).
    static let ordered: JinjaValue = try! JinjaValue.parseJSON(String(contentsOfFile: dir + "vectors.json", encoding: .utf8))

    static func messages(_ v: JinjaValue) -> [JinjaValue] { v.items }

    func testRealTemplatesEqualTransformers() throws {
        let templates = Self.vectors["templates"] as! [String: [String: Any]]
        var real = Set<String>(), renders = 0, raised = 0
        for (file, entry) in templates.sorted(by: { $0.key < $1.key }) {
            let specials = entry["special_tokens"] as! [String: String]
            let t = try ChatTemplate(name: file, source: try Self.source(file), specialTokens: specials, stopTokens: [])
            let ordered = Self.ordered["templates"][file]["cases"].items
            for (j, c) in (entry["cases"] as! [[String: Any]]).enumerated() {
                let msgs = Self.messages(ordered[j]["messages"])
                let gen = c["add_generation_prompt"] as! Bool
                var options: [String: JinjaValue] = [:]
                if case let .object(o) = ordered[j]["options"] { for (k, v) in o.entries { options[k] = v } }
                XCTAssertEqual(options.count, (c["options"] as! [String: Any]).count, "\(file) case \(j) options")
                let what = "\(file) gen=\(gen) \(c["options"]!) \(c["messages"]!)"
                if let expected = c["text"] as? String {
                    XCTAssertEqual(try t.render(messages: msgs, addGenerationPrompt: gen, variables: options), expected, what)
                    renders += 1
                } else {
                    XCTAssertThrowsError(try t.render(messages: msgs, addGenerationPrompt: gen, variables: options), what) { e in
                        XCTAssertEqual((e as? ChatTemplateError)?.error, .raised(line: 1, message: c["error"] as! String), what)
                    }
                    raised += 1
                }
            }
            if !file.hasPrefix("forge-ir-") { real.insert(file) }
        }
        XCTAssertGreaterThanOrEqual(real.count, 8, "real templates: \(real.sorted())")
        XCTAssertEqual(renders + raised, 224)
        XCTAssertEqual(raised, 4)  // gemma-2 refuses a system message
    }

    func testEngineEqualsJinja2() throws {
        for (k, c) in (Self.vectors["engine"] as! [[String: Any]]).enumerated() {
            let src = c["template"] as! String
            let ctx = Self.ordered["engine"][k]["context"].dictionary
            let what = "engine case \(k): \(src)"
            let t = try JinjaTemplate(src)
            if let expected = c["text"] as? String {
                XCTAssertEqual(try t.render(ctx), expected, what)
            } else {
                XCTAssertThrowsError(try t.render(ctx), what) { e in
                    guard let je = e as? JinjaError else { return XCTFail("\(what): \(e)") }
                    if c["error_type"] as? String == "TemplateError" {
                        XCTAssertEqual(je, .raised(line: 1, message: c["error"] as! String), what)
                    } else if c["error_type"] as? String == "UndefinedError" {
                        XCTAssertEqual(je.message, c["error"] as! String, what)
                    }
                }
            }
        }
    }

    func testTokenizerConfigWithNamedTemplatesAndAddedTokenObjects() throws {
        let c = Self.vectors["config"] as! [String: Any]
        let data = try JSONSerialization.data(withJSONObject: c["tokenizer_config"]!)
        let config = try TokenizerConfig(data: data, file: "tokenizer_config.json")
        XCTAssertEqual(config.specialTokens["bos_token"], "<|begin_of_text|>")
        XCTAssertEqual(config.specialTokens["eos_token"], "<|eot_id|>")
        XCTAssertEqual(config.chatTemplates.keys.sorted(), ["default", "tool_use"])
        let msgs = Self.messages(Self.ordered["config"]["messages"])
        let def = try XCTUnwrap(try ChatTemplate(config: config, tokenizer: nil))
        XCTAssertEqual(def.name, "tokenizer_config.json:default")
        XCTAssertEqual(try def.render(messages: msgs, addGenerationPrompt: true), c["default"] as! String)
        let tool = try XCTUnwrap(try ChatTemplate(config: config, name: "tool_use", tokenizer: nil))
        XCTAssertEqual(try tool.render(messages: msgs, addGenerationPrompt: false), c["tool_use"] as! String)
        XCTAssertThrowsError(try ChatTemplate(config: config, name: "rag", tokenizer: nil)) { e in
            XCTAssertTrue("\(e)".contains("no template named 'rag' (templates: default, tool_use)"), "\(e)")
        }
        XCTAssertEqual(def.stopTokens, ["<|eot_id|>"])
        // several templates and no default: transformers refuses too
        let none = TokenizerConfig(chatTemplates: ["a": "x", "b": "y"])
        XCTAssertThrowsError(try ChatTemplate(config: none, tokenizer: nil)) { e in
            XCTAssertTrue("\(e)".contains("none named 'default'"), "\(e)")
        }
        XCTAssertNil(try ChatTemplate(config: TokenizerConfig(), tokenizer: nil))
    }

    func testBuiltinsAreTheCommittedTemplates() throws {
        XCTAssertEqual(ChatTemplate.builtinNames, ["chatml", "smollm2", "qwen2", "qwen2.5", "qwen3", "llama3", "mistral", "phi3",
                                                   "gemma", "deepseek-r1", "gemma4"])
        let recorded = Self.vectors["templates"] as! [String: Any]
        for name in ChatTemplate.builtinNames {
            let file = try XCTUnwrap(ChatTemplate.builtinFile(name))
            XCTAssertEqual(ChatTemplate.named(name)?.source, try Self.source(file), name)
            XCTAssertNotNil(recorded[file], "\(name): \(file) has transformers renderings")
        }
        XCTAssertEqual(ChatTemplate.named("gemma4")?.reasoning, .gemma4)
        XCTAssertEqual(ChatTemplate.named("qwen3")?.reasoning, .think)
        XCTAssertNil(ChatTemplate.named("llama3")?.reasoning)
        XCTAssertNil(ChatTemplate.named("nope"))
    }

    func testTemplateErrorsNameTheLine() throws {
        XCTAssertThrowsError(try ChatTemplate(name: "t.jinja", source: "a\n{% if x %}\nb\n{% endfor %}", stopTokens: [])) { e in
            XCTAssertEqual((e as? ChatTemplateError)?.error.line, 4, "\(e)")
            XCTAssertTrue("\(e)".hasPrefix("chat template t.jinja line 4: syntax error"), "\(e)")
        }
        XCTAssertThrowsError(try ChatTemplate(name: "t.jinja", source: "{% for m in messages %}\n{{ m.content }}", stopTokens: [])) { e in
            XCTAssertTrue("\(e)".contains("line 1") && "\(e)".contains("'for' opened on line 1 needs 'endfor'"), "\(e)")
        }
        let t = try ChatTemplate(name: "t.jinja", source: "ok\n\n{{ messages[0].content + 1 }}", stopTokens: [])
        XCTAssertThrowsError(try t.render([.user("x")], addGenerationPrompt: false)) { e in
            XCTAssertEqual("\(e)", "chat template t.jinja line 3: can only concatenate str (not \"int\") to str")
        }
        let r = try ChatTemplate(name: "t.jinja", source: "{% if messages[0].role == 'system' %}\n{{ raise_exception('System role not supported') }}{% endif %}",
                                 stopTokens: [])
        XCTAssertThrowsError(try r.render([.system("s")], addGenerationPrompt: false)) { e in
            XCTAssertEqual("\(e)", "chat template t.jinja line 2: the template refused the messages: System role not supported")
        }
        for bad in ["{{ 'unterminated }}", "{% include 'x' %}", "{{ a | }}", "{{ x ]", "{% set %}", "{% macro m( %}{% endmacro %}", "{#"] {
            XCTAssertThrowsError(try JinjaTemplate(bad), bad) { e in XCTAssertNotNil(e as? JinjaError, bad) }
        }
        // runaway recursion is an error, not a crash
        let rec = try JinjaTemplate("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}")
        XCTAssertThrowsError(try rec.render([:])) { e in XCTAssertTrue("\(e)".contains("maximum call depth"), "\(e)") }
        XCTAssertThrowsError(try JinjaTemplate("{{ range(10000000) | length }}").render([:]))
        // hostile templates: errors, not hangs, stack overflows or runaway memory
        let bounded = ["{% for a in range(99999) %}{% for b in range(99999) %}{% endfor %}{% endfor %}",
                       "{{ 'x' * 1000000000 }}", "{{ [1] * 1000000000 }}",
                       "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
                       "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}"]
        for src in bounded {
            var t = try JinjaTemplate(src)
            t.maxSteps = 20_000  // the default (1000000) takes a minute of a debug build to reach
            XCTAssertThrowsError(try t.render([:]), src) { e in XCTAssertNotNil(e as? JinjaError, src) }
        }
        for deep in [String(repeating: "(", count: 5000) + "1" + String(repeating: ")", count: 5000),
                     String(repeating: "[", count: 5000) + String(repeating: "]", count: 5000)] {
            XCTAssertThrowsError(try JinjaTemplate("{{ " + deep + " }}")) { e in XCTAssertTrue("\(e)".contains("nested more than"), "\(e)") }
        }
        XCTAssertThrowsError(try JinjaTemplate(String(repeating: "{% if x %}", count: 5000))) { e in XCTAssertTrue("\(e)".contains("nested more than"), "\(e)") }
    }

    func testStrftimeNowIsTransformersGlobal() throws {
        let t = try JinjaTemplate("{{ strftime_now('%d %b %Y') }}|{{ strftime_now is defined }}")
        let date = Date(timeIntervalSince1970: 1_764_547_200 + 12 * 3600)  // 2025-12-01 12:00 UTC
        XCTAssertEqual(try t.render([:], now: { date }), localDay(date) + "|True")
        // without a clock it is not defined (as in transformers 4.44): calling it is an error
        XCTAssertThrowsError(try t.render([:], now: nil))
        XCTAssertEqual(try JinjaTemplate("{{ strftime_now is defined }}").render([:], now: nil), "False")
    }

    /// The day as `%d %b %Y` in the local time zone, computed with Foundation's formatter.
    func localDay(_ d: Date) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.dateFormat = "dd MMM yyyy"
        return f.string(from: d)
    }

    // MARK: Gemma 4

    func testGemma4StyleTokenizerFixture() throws {
        let tk = try Tokenizer(path: Fixtures.repoRoot + "/models-ir/tokenizers/tiny_gemma4_style.json")
        for (token, id) in [("<pad>", 0), ("<eos>", 1), ("<bos>", 2), ("<|think|>", 98), ("<|channel>", 100), ("<channel|>", 101),
                            ("<|turn>", 105), ("<turn|>", 106)] {
            XCTAssertEqual(tk.tokenToId(token), id, token)
            XCTAssertTrue(tk.isSpecial(id), token)
        }
        let t = try XCTUnwrap(ChatTemplate.detect(for: tk))
        XCTAssertEqual(t.name, "gemma4")
        XCTAssertEqual(t.specialTokens["bos_token"], "<bos>")
        XCTAssertEqual(try t.stopTokenIds(using: tk), [106, 1])
        let g = Self.vectors["gemma4"] as! [String: Any]
        for (j, p) in (g["prompts"] as! [[String: Any]]).enumerated() {
            let msgs = Self.messages(Self.ordered["gemma4"]["prompts"][j]["messages"])
            let text = try t.render(messages: msgs, addGenerationPrompt: true)
            XCTAssertEqual(text, p["text"] as! String)
            let ids = tk.encode(text, addSpecialTokens: false)
            XCTAssertEqual(ids, p["ids"] as! [Int])
            XCTAssertEqual(ids.first, 2)  // <bos> written by the template, once
            XCTAssertEqual(ids.filter { $0 == 2 }.count, 1)
            let opening = [105] + tk.encode("model\n", addSpecialTokens: false)
            XCTAssertEqual(Array(ids.suffix(opening.count)), opening)  // no empty thought channel after <|turn>model\n
            XCTAssertFalse(ids.contains(100))
            XCTAssertEqual(text.contains("<|turn>system\n"), (p["messages"] as! [[String: Any]]).first?["role"] as? String == "system")
        }
    }

    /// The built-in Gemma 4 template against the public copy of Google's (llama.cpp's
    /// gemma4.jinja), both as transformers renders them: equal everywhere except the empty thought
    /// channel that copy appends to the generation prompt when thinking is off (the built-in adds
    /// it only with empty_thought=true).
    func testGemma4BuiltinMatchesThePublicTemplate() throws {
        let t = Self.vectors["templates"] as! [String: [String: Any]]
        let ours = t["forge-ir-gemma4.jinja"]!["cases"] as! [[String: Any]]
        let theirs = t["ggml-org-llama.cpp-gemma4.jinja"]!["cases"] as! [[String: Any]]
        func find(_ msgs: Any, _ gen: Bool, _ options: [String: Bool]) -> String? {
            theirs.first { NSArray(array: $0["messages"] as! [Any]).isEqual(to: msgs as! [Any]) && $0["add_generation_prompt"] as! Bool == gen
                && ($0["options"] as! [String: Bool]) == options }?["text"] as? String
        }
        var compared = 0
        for c in ours {
            let gen = c["add_generation_prompt"] as! Bool
            let options = c["options"] as! [String: Bool]
            let theirOptions: [String: Bool]
            if options == ["empty_thought": true] { theirOptions = [:] }
            else if options == ["enable_thinking": true] { theirOptions = options }
            else if options.isEmpty && !gen { theirOptions = [:] }
            else {
                // the E2B/E4B generation prompt: no thought channel, where the public copy has one
                XCTAssertEqual((c["text"] as! String) + "<|channel>thought\n<channel|>", find(c["messages"]!, gen, [:]))
                compared += 1
                continue
            }
            XCTAssertEqual(c["text"] as? String, find(c["messages"]!, gen, theirOptions), "\(c["messages"]!) gen=\(gen) \(options)")
            compared += 1
        }
        XCTAssertEqual(compared, 42)
    }

    func testReasoningRouterSplitsTheThoughtChannel() throws {
        let tk = try Tokenizer(path: Fixtures.repoRoot + "/models-ir/tokenizers/tiny_gemma4_style.json")
        let s = (Self.vectors["gemma4"] as! [String: Any])["stream"] as! [String: Any]
        let stream = s["ids"] as! [Int]
        let stops = Set(s["stop_ids"] as! [Int])
        var router = try XCTUnwrap(ReasoningRouter(tokenizer: tk, markers: .gemma4))
        var pieces: [(ReasoningRouter.Channel, String)] = []
        for id in stream {
            if stops.contains(id) { break }  // the generator stops before passing a stop id on
            pieces += router.push(id)
        }
        pieces += router.finish()
        XCTAssertEqual(router.reasoning, s["reasoning"] as! String)
        XCTAssertEqual(router.response, s["response"] as! String)
        XCTAssertTrue(router.sawReasoning)
        XCTAssertEqual(pieces.filter { $0.0 == .reasoning }.map(\.1).joined(), s["reasoning"] as! String)
        XCTAssertEqual(pieces.filter { $0.0 == .response }.map(\.1).joined(), s["response"] as! String)
        // every reasoning piece comes before the first response piece
        let firstResponse = try XCTUnwrap(pieces.firstIndex { $0.0 == .response })
        XCTAssertFalse(pieces[firstResponse...].contains { $0.0 == .reasoning })
        // without a channel everything is response; an unclosed channel is all reasoning
        var plain = try XCTUnwrap(ReasoningRouter(tokenizer: tk, markers: .gemma4))
        let answer = tk.encode("It is 4.", addSpecialTokens: false)
        for id in answer { _ = plain.push(id) }
        _ = plain.finish()
        XCTAssertEqual(plain.response, "It is 4.")
        XCTAssertEqual(plain.reasoning, "")
        XCTAssertFalse(plain.sawReasoning)
        var open = try XCTUnwrap(ReasoningRouter(tokenizer: tk, markers: .gemma4))
        for id in [100] + tk.encode("thought\nhm", addSpecialTokens: false) { _ = open.push(id) }
        _ = open.finish()
        XCTAssertEqual(open.reasoning, "hm")
        XCTAssertEqual(open.response, "")
        // newlines closing a span and opening the answer after it are dropped (`</think>\n\n`)
        var nl = try XCTUnwrap(ReasoningRouter(tokenizer: tk, markers: ReasoningMarkers(open: "<|channel>", close: "<channel|>", label: "\n")))
        var nlPieces: [(ReasoningRouter.Channel, String)] = []
        for id in [100] + tk.encode("\nStep one.\n\nStep two.\n", addSpecialTokens: false) + [101]
            + tk.encode("\n\nIt is 4.\n", addSpecialTokens: false) { nlPieces += nl.push(id) }
        nlPieces += nl.finish()
        XCTAssertEqual(nl.reasoning, "Step one.\n\nStep two.")
        XCTAssertEqual(nl.response, "It is 4.\n")
        XCTAssertEqual(nlPieces.filter { $0.0 == .reasoning }.map(\.1).joined(), nl.reasoning)
        XCTAssertEqual(nlPieces.filter { $0.0 == .response }.map(\.1).joined(), nl.response)
        // a template whose prompt opens the span starts in it
        XCTAssertTrue(ChatTemplate.named("qwen3")!.promptOpensReasoning("<|im_start|>assistant\n<think>\n"))
        XCTAssertFalse(ChatTemplate.named("qwen3")!.promptOpensReasoning("<think>\n\n</think>\n\n"))
        XCTAssertNil(ReasoningRouter(tokenizer: try Tokenizer(path: Fixtures.repoRoot + "/models-ir/tokenizers/tiny_gpt2_style.json"), markers: .gemma4))
    }
}

extension JinjaValue {
    subscript(_ key: String) -> JinjaValue {
        if case let .object(o) = self { return o[key] ?? .undefined(key) }
        return .undefined(key)
    }

    subscript(_ i: Int) -> JinjaValue {
        if case let .array(a) = self, i < a.count { return a[i] }
        return .undefined("\(i)")
    }

    var items: [JinjaValue] {
        if case let .array(a) = self { return a }
        return []
    }

    var dictionary: [String: JinjaValue] {
        guard case let .object(o) = self else { return [:] }
        return Dictionary(o.entries, uniquingKeysWith: { a, _ in a })
    }
}
