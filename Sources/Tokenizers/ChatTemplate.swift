import Foundation

/// One message of a chat.
public struct ChatMessage: Equatable, Sendable {
    /// A role as chat templates name it (`system`, `user`, `assistant`, `tool`, `developer`…).
    public struct Role: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(stringLiteral value: String) { rawValue = value }
        public static let system = Role(rawValue: "system")
        public static let user = Role(rawValue: "user")
        public static let assistant = Role(rawValue: "assistant")
        public static let tool = Role(rawValue: "tool")
    }

    public var role: Role
    public var content: String

    public init(_ role: Role, _ content: String) {
        self.role = role
        self.content = content
    }

    public static func system(_ content: String) -> ChatMessage { ChatMessage(.system, content) }
    public static func user(_ content: String) -> ChatMessage { ChatMessage(.user, content) }
    public static func assistant(_ content: String) -> ChatMessage { ChatMessage(.assistant, content) }

    /// `{"role": …, "content": …}` as the template sees it.
    public var jinjaValue: JinjaValue {
        .object(JinjaObject([("role", .string(role.rawValue)), ("content", .string(content))]))
    }
}

/// The tokens around a reasoning span in generated text: Gemma 4's `<|channel>thought\n … <channel|>`,
/// Qwen3's and DeepSeek-R1's `<think>\n … </think>`. `label` is the text right after `open`
/// that names the channel; it is not part of the reasoning.
public struct ReasoningMarkers: Equatable, Sendable {
    public var open: String
    public var close: String
    public var label: String

    public init(open: String, close: String, label: String = "") {
        self.open = open
        self.close = close
        self.label = label
    }

    public static let gemma4 = ReasoningMarkers(open: "<|channel>", close: "<channel|>", label: "thought\n")
    public static let think = ReasoningMarkers(open: "<think>", close: "</think>", label: "\n")
}

/// A chat template failed to parse or render; names the template and its line.
public struct ChatTemplateError: Error, Equatable, CustomStringConvertible {
    public var template: String
    public var error: JinjaError

    public var description: String {
        switch error {
        case let .raised(line, message):
            return "chat template \(template) line \(line): the template refused the messages: \(message)"
        case let .syntax(line, message):
            return "chat template \(template) line \(line): syntax error: \(message)"
        case let .runtime(line, message):
            return "chat template \(template) line \(line): \(message)"
        }
    }
}

/// A chat prompt format: a Jinja chat template (`JinjaTemplate`) rendered as transformers'
/// `apply_chat_template(tokenize=False)` renders it, the special tokens it sees (`bos_token`,
/// `eos_token`…), the tokens that end the assistant's turn, and the markers of a reasoning span.
///
/// Where it comes from (`forge-ir generate --template`, default `auto`):
/// 1. the tokenizer's own `chat_template` (`tokenizer_config.json` or `chat_template.jinja` next
///    to `tokenizer.json`: `ChatTemplate(config:name:tokenizer:)`);
/// 2. else a built-in template the vocabulary points to (`detect(for:)`);
/// 3. a built-in by name (`named(_:)`: chatml, smollm2, qwen2, qwen2.5, qwen3, llama3, mistral,
///    phi3, gemma, gemma4, deepseek-r1 — real templates, see `models-ir/chat_templates/`), or a
///    `.jinja` file, override both.
public struct ChatTemplate: Equatable, Sendable {
    public var name: String
    public let template: JinjaTemplate
    /// `bos_token`, `eos_token`… as the template sees them.
    public var specialTokens: [String: String]
    public var additionalSpecialTokens: [String]
    /// Token strings that end the assistant's turn.
    public var stopTokens: [String]
    /// Ids that also end it (`generation_config.json`'s `eos_token_id`).
    public var stopIds: [Int]
    /// The reasoning span's markers, when the format has one.
    public var reasoning: ReasoningMarkers?

    public var source: String { template.source }

    /// - Throws: `ChatTemplateError` when `source` is not valid in the Jinja subset.
    public init(name: String, source: String, specialTokens: [String: String] = [:], additionalSpecialTokens: [String] = [],
                stopTokens: [String], stopIds: [Int] = [], reasoning: ReasoningMarkers? = nil) throws {
        self.name = name
        do {
            template = try JinjaTemplate(source)
        } catch let e as JinjaError {
            throw ChatTemplateError(template: name, error: e)
        }
        self.specialTokens = specialTokens
        self.additionalSpecialTokens = additionalSpecialTokens
        self.stopTokens = stopTokens
        self.stopIds = stopIds
        self.reasoning = reasoning
    }

    public static func == (a: ChatTemplate, b: ChatTemplate) -> Bool {
        a.name == b.name && a.source == b.source && a.specialTokens == b.specialTokens && a.stopTokens == b.stopTokens
            && a.stopIds == b.stopIds && a.reasoning == b.reasoning && a.additionalSpecialTokens == b.additionalSpecialTokens
    }

    // MARK: built-in templates

    private static let builtins: [String: ChatTemplate] = {
        var d: [String: ChatTemplate] = [:]
        for b in BuiltinChatTemplateSources.all {
            let r = b.reasoning.map { ReasoningMarkers(open: $0.0, close: $0.1, label: $0.2) }
            // the built-in texts are parsed by the tests: a failure here is a build defect
            d[b.name] = try! ChatTemplate(name: b.name, source: b.source, stopTokens: b.stopTokens, reasoning: r)
        }
        return d
    }()

    /// The built-in names, in the order `--help` lists them.
    public static let builtinNames: [String] = BuiltinChatTemplateSources.all.map(\.name)

    /// The `.jinja` file (in `models-ir/chat_templates/`) a built-in's text was copied from.
    public static func builtinFile(_ name: String) -> String? {
        BuiltinChatTemplateSources.all.first { $0.name == name }?.file
    }

    /// A built-in template by name (case-insensitive), without special tokens (see
    /// `resolvingSpecialTokens(with:)`).
    public static func named(_ name: String) -> ChatTemplate? { builtins[name.lowercased()] }

    public static var chatML: ChatTemplate { builtins["chatml"]! }
    public static var smolLM2: ChatTemplate { builtins["smollm2"]! }
    public static var qwen25: ChatTemplate { builtins["qwen2.5"]! }
    public static var gemma4: ChatTemplate { builtins["gemma4"]! }

    /// The built-in template a tokenizer's vocabulary points to, with its special tokens:
    /// Gemma 4 (`<|turn>`), Gemma (`<start_of_turn>`), SmolLM2 (ChatML with `<repo_name>`),
    /// Qwen3 (ChatML with `<think>`), ChatML (`<|im_start|>`), Llama 3 (`<|start_header_id|>`),
    /// Phi-3 (`<|user|>` / `<|end|>`), Mistral (`[INST]`), DeepSeek-R1 (`<｜User｜>`); nil otherwise.
    public static func detect(for tokenizer: Tokenizer) -> ChatTemplate? {
        func has(_ tokens: String...) -> Bool { tokens.allSatisfy { tokenizer.tokenToId($0) != nil } }
        let name: String?
        if has("<|turn>", "<turn|>") { name = "gemma4" }
        else if has("<start_of_turn>", "<end_of_turn>") { name = "gemma" }
        else if has("<|im_start|>", "<|im_end|>") { name = has("<repo_name>") ? "smollm2" : (has("<think>", "</think>") ? "qwen3" : "chatml") }
        else if has("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>") { name = "llama3" }
        else if has("<|user|>", "<|assistant|>", "<|end|>") { name = "phi3" }
        else if has("[INST]", "[/INST]") { name = "mistral" }
        else if has("<｜User｜>", "<｜Assistant｜>") { name = "deepseek-r1" }
        else { name = nil }
        return name.flatMap { named($0)?.resolvingSpecialTokens(with: tokenizer) }
    }

    /// This template with `bos_token` / `eos_token` taken from the tokenizer when not set: the
    /// token its post-processor puts first, else the first of `<bos>`, `<|begin_of_text|>`, `<s>`,
    /// `<｜begin▁of▁sentence｜>` it has; the eos is the first stop token it has, else `<eos>`,
    /// `</s>`, `<|endoftext|>`, `<|end_of_text|>`.
    public func resolvingSpecialTokens(with tokenizer: Tokenizer) -> ChatTemplate {
        var t = self
        if t.specialTokens["bos_token"] == nil {
            let fromProcessor = tokenizer.addedSpecialIds.prefix.first.flatMap { tokenizer.idToToken($0) }
            if let bos = fromProcessor ?? ["<bos>", "<|begin_of_text|>", "<s>", "<｜begin▁of▁sentence｜>"].first(where: { tokenizer.tokenToId($0) != nil }) {
                t.specialTokens["bos_token"] = bos
            }
        }
        if t.specialTokens["eos_token"] == nil,
           let eos = (stopTokens + ["<eos>", "</s>", "<|endoftext|>", "<|end_of_text|>"]).first(where: { tokenizer.tokenToId($0) != nil }) {
            t.specialTokens["eos_token"] = eos
        }
        return t
    }

    // MARK: the tokenizer's own template

    /// Turn-ending tokens a template may write; those present in the vocabulary and written by
    /// the template (or equal to its eos) stop generation.
    static let knownStopTokens = ["<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<end_of_turn>", "<turn|>", "<|end_of_turn|>",
                                  "<｜end▁of▁sentence｜>", "</s>", "<|end_of_text|>", "<eos>", "<|endoftext|>"]

    /// The tokenizer's own `chat_template` (named, or the default), with its special tokens, its
    /// stop tokens (the eos, `generation_config.json`'s eos ids, the known end-of-turn tokens it
    /// writes) and the reasoning markers it uses (`<|channel>`…`<channel|>` or `<think>`…`</think>`,
    /// when they are single tokens of `tokenizer`). Nil when the config has no template.
    /// - Throws: `TokenizerError` for a missing name, `ChatTemplateError` for a template that
    ///   does not parse.
    public init?(config: TokenizerConfig, name: String? = nil, tokenizer: Tokenizer?) throws {
        guard let (tname, source) = try config.chatTemplateSource(named: name) else { return nil }
        let file = (config.file as NSString).lastPathComponent
        let display = config.chatTemplates.count > 1 || tname != "default" ? "\(file):\(tname)" : file
        try self.init(inferringFrom: source, name: display, specialTokens: config.specialTokens,
                      additionalSpecialTokens: config.additionalSpecialTokens, stopIds: config.generationEOSIds, tokenizer: tokenizer,
                      fillSpecialTokens: false)
    }

    /// A template text whose stop tokens and reasoning markers are inferred as for a tokenizer's
    /// own template (see `init(config:name:tokenizer:)`). With `fillSpecialTokens`, `bos_token` /
    /// `eos_token` come from the tokenizer when `specialTokens` lacks them (never for a config's
    /// own template: transformers leaves an unset token undefined).
    /// - Throws: `ChatTemplateError` for a template that does not parse.
    public init(inferringFrom source: String, name: String, specialTokens: [String: String] = [:], additionalSpecialTokens: [String] = [],
                stopIds: [Int] = [], tokenizer: Tokenizer?, fillSpecialTokens: Bool = true) throws {
        var stops: [String] = []
        if let eos = specialTokens["eos_token"] { stops.append(eos) }
        for t in Self.knownStopTokens where !stops.contains(t) && source.contains(t) { stops.append(t) }
        if let tokenizer { stops = stops.filter { tokenizer.tokenToId($0) != nil } }
        var reasoning: ReasoningMarkers?
        for m in [ReasoningMarkers.gemma4, .think] where source.contains(m.close) {
            if let tokenizer, tokenizer.tokenToId(m.open) == nil || tokenizer.tokenToId(m.close) == nil { continue }
            reasoning = m
            break
        }
        try self.init(name: name, source: source, specialTokens: specialTokens, additionalSpecialTokens: additionalSpecialTokens,
                      stopTokens: stops, stopIds: stopIds, reasoning: reasoning)
        if let tokenizer, fillSpecialTokens { self = resolvingSpecialTokens(with: tokenizer) }
    }

    // MARK: rendering

    /// The prompt text of `messages` (the template's `messages` variable); with
    /// `addGenerationPrompt` it ends by opening the assistant's turn. `variables` are passed to
    /// the template as extra keyword arguments are in transformers (`enable_thinking`,
    /// `date_string`…); `tools` and `documents` are none unless given.
    /// - Throws: `ChatTemplateError` naming the template line (`raise_exception` included).
    public func render(_ messages: [ChatMessage], addGenerationPrompt: Bool, variables: [String: JinjaValue] = [:],
                       now: (() -> Date)? = { Date() }) throws -> String {
        try render(messages: messages.map(\.jinjaValue), addGenerationPrompt: addGenerationPrompt, variables: variables, now: now)
    }

    /// As `render(_:addGenerationPrompt:variables:now:)`, with messages as template values (any
    /// fields: `tool_calls`, `reasoning_content`…).
    public func render(messages: [JinjaValue], addGenerationPrompt: Bool, variables: [String: JinjaValue] = [:],
                       now: (() -> Date)? = { Date() }) throws -> String {
        var context: [String: JinjaValue] = [:]
        for (k, v) in specialTokens { context[k] = .string(v) }
        if !additionalSpecialTokens.isEmpty { context["additional_special_tokens"] = .array(additionalSpecialTokens.map { .string($0) }) }
        context["tools"] = JinjaValue.none
        context["documents"] = JinjaValue.none
        context["messages"] = .array(messages)
        context["add_generation_prompt"] = .bool(addGenerationPrompt)
        for (k, v) in variables { context[k] = v }
        do {
            return try template.render(context, now: now)
        } catch let e as JinjaError {
            throw ChatTemplateError(template: name, error: e)
        }
    }

    /// Renders and encodes (without the post-processor's special tokens: the template writes
    /// its own, as `apply_chat_template(tokenize=True)` does).
    public func encode(_ messages: [ChatMessage], addGenerationPrompt: Bool, variables: [String: JinjaValue] = [:],
                       using tokenizer: Tokenizer) throws -> [Int] {
        tokenizer.encode(try render(messages, addGenerationPrompt: addGenerationPrompt, variables: variables), addSpecialTokens: false)
    }

    /// Ids of the stop tokens the tokenizer has, then `stopIds`.
    /// - Throws: `TokenizerError.unknownToken` when it has none of them.
    public func stopTokenIds(using tokenizer: Tokenizer) throws -> [Int] {
        var ids = stopTokens.compactMap { tokenizer.tokenToId($0) }
        for i in stopIds where !ids.contains(i) { ids.append(i) }
        if ids.isEmpty {
            throw TokenizerError.unknownToken(file: tokenizer.file, token: stopTokens.joined(separator: " / "))
        }
        return ids
    }

    /// Whether a prompt ends inside an open reasoning span (templates that open `<think>` in the
    /// generation prompt): generation then starts in the reasoning channel.
    public func promptOpensReasoning(_ prompt: String) -> Bool {
        guard let r = reasoning else { return false }
        let u = Array(prompt.unicodeScalars), o = Array(r.open.unicodeScalars), c = Array(r.close.unicodeScalars)
        func last(_ p: [Unicode.Scalar]) -> Int {
            guard !p.isEmpty, u.count >= p.count else { return -1 }
            for i in stride(from: u.count - p.count, through: 0, by: -1) where u[i..<(i + p.count)].elementsEqual(p) { return i }
            return -1
        }
        let lo = last(o)
        return lo >= 0 && lo > last(c)
    }
}
