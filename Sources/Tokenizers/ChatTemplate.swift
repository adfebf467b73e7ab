/// One message of a chat.
public struct ChatMessage: Equatable, Sendable {
    public enum Role: String, Sendable {
        case system, user, assistant
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
}

/// Chat prompt formats written in Swift (no Jinja): ChatML (SmolLM2, Qwen) and Gemma 4's turns.
///
/// - ChatML: `<|im_start|>role\ncontent<|im_end|>\n` per message; the generation prompt is
///   `<|im_start|>assistant\n`. SmolLM2 and Qwen2 templates insert a default system message when
///   the first message is not a system message. Stops on `<|im_end|>` (and `<|endoftext|>`).
/// - Gemma 4: `<bos>` first (the template writes it; encode with `addSpecialTokens: false`),
///   a `<|turn>system\n…<turn|>\n` turn when there is a system message (or thinking is on:
///   `<|think|>\n` opens it), then `<|turn>user\n…<turn|>\n` / `<|turn>model\n…<turn|>\n` with
///   contents trimmed (earlier model turns lose their `<|channel>…<channel|>` thoughts); the
///   generation prompt is `<|turn>model\n` (the 26B/31B templates add an empty thought channel
///   `<|channel>thought\n<channel|>` when thinking is off: `emptyThoughtChannel`). Stops on
///   `<turn|>` and `<eos>`.
public struct ChatTemplate: Equatable, Sendable {
    public enum Format: Equatable, Sendable {
        case chatML(defaultSystemPrompt: String?)
        case gemma4(enableThinking: Bool, emptyThoughtChannel: Bool)
    }

    public var name: String
    public var format: Format
    /// Token strings that end the assistant's turn.
    public var stopTokens: [String]

    public init(name: String, format: Format, stopTokens: [String]) {
        self.name = name
        self.format = format
        self.stopTokens = stopTokens
    }

    /// ChatML without a default system message.
    public static let chatML = ChatTemplate(name: "chatml", format: .chatML(defaultSystemPrompt: nil),
                                            stopTokens: ["<|im_end|>", "<|endoftext|>"])
    /// SmolLM2-Instruct's template (the GGUF's `tokenizer.chat_template`).
    public static let smolLM2 = ChatTemplate(
        name: "smollm2",
        format: .chatML(defaultSystemPrompt: "You are a helpful AI assistant named SmolLM, trained by Hugging Face"),
        stopTokens: ["<|im_end|>", "<|endoftext|>"])
    /// Qwen2-Instruct's template.
    public static let qwen2 = ChatTemplate(name: "qwen2", format: .chatML(defaultSystemPrompt: "You are a helpful assistant."),
                                           stopTokens: ["<|im_end|>", "<|endoftext|>"])
    /// Qwen2.5-Instruct's template (without tools).
    public static let qwen25 = ChatTemplate(
        name: "qwen2.5",
        format: .chatML(defaultSystemPrompt: "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."),
        stopTokens: ["<|im_end|>", "<|endoftext|>"])
    /// Gemma 4, thinking off, no empty thought channel (the E2B/E4B generation prompt).
    public static let gemma4 = ChatTemplate(name: "gemma4", format: .gemma4(enableThinking: false, emptyThoughtChannel: false),
                                            stopTokens: ["<turn|>", "<eos>"])

    public static let all: [ChatTemplate] = [.chatML, .smolLM2, .qwen2, .qwen25, .gemma4]

    /// A template by name: chatml, smollm2, qwen2, qwen2.5, gemma4.
    public static func named(_ name: String) -> ChatTemplate? {
        all.first { $0.name == name.lowercased() }
    }

    /// The template a tokenizer's special tokens point to: Gemma 4 for `<|turn>`, SmolLM2 for a
    /// ChatML vocabulary with SmolLM's `<repo_name>`, plain ChatML for other `<|im_start|>`
    /// vocabularies; nil otherwise.
    public static func detect(for tokenizer: Tokenizer) -> ChatTemplate? {
        if tokenizer.tokenToId("<|turn>") != nil && tokenizer.tokenToId("<turn|>") != nil { return .gemma4 }
        if tokenizer.tokenToId("<|im_start|>") != nil && tokenizer.tokenToId("<|im_end|>") != nil {
            return tokenizer.tokenToId("<repo_name>") != nil ? .smolLM2 : .chatML
        }
        return nil
    }

    /// The prompt text of `messages`; with `addGenerationPrompt` it ends by opening the
    /// assistant's turn.
    public func render(_ messages: [ChatMessage], addGenerationPrompt: Bool) -> String {
        switch format {
        case let .chatML(defaultSystem):
            var out = ""
            for (i, m) in messages.enumerated() {
                if i == 0, m.role != .system, let sys = defaultSystem {
                    out += "<|im_start|>system\n" + sys + "<|im_end|>\n"
                }
                out += "<|im_start|>" + m.role.rawValue + "\n" + m.content + "<|im_end|>\n"
            }
            if addGenerationPrompt { out += "<|im_start|>assistant\n" }
            return out
        case let .gemma4(thinking, emptyThought):
            var out = "<bos>"
            var rest = messages[...]
            let hasSystem = messages.first?.role == .system
            if thinking || hasSystem {
                out += "<|turn>system\n"
                if thinking { out += "<|think|>\n" }
                if hasSystem { out += ChatTemplate.trim(messages[0].content); rest = rest.dropFirst() }
                out += "<turn|>\n"
            }
            for m in rest {
                let role = m.role == .assistant ? "model" : m.role.rawValue
                out += "<|turn>" + role + "\n"
                out += m.role == .assistant ? ChatTemplate.stripThinking(m.content) : ChatTemplate.trim(m.content)
                out += "<turn|>\n"
            }
            if addGenerationPrompt {
                out += "<|turn>model\n"
                if emptyThought { out += "<|channel>thought\n<channel|>" }
            }
            return out
        }
    }

    /// Renders and encodes (without the post-processor's special tokens: the template writes
    /// its own).
    public func encode(_ messages: [ChatMessage], addGenerationPrompt: Bool, using tokenizer: Tokenizer) -> [Int] {
        tokenizer.encode(render(messages, addGenerationPrompt: addGenerationPrompt), addSpecialTokens: false)
    }

    /// Ids of the stop tokens the tokenizer has.
    /// - Throws: `TokenizerError.unknownToken` when it has none of them.
    public func stopTokenIds(using tokenizer: Tokenizer) throws -> [Int] {
        let ids = stopTokens.compactMap { tokenizer.tokenToId($0) }
        if ids.isEmpty {
            throw TokenizerError.unknownToken(file: tokenizer.file, token: stopTokens.joined(separator: " / "))
        }
        return ids
    }

    /// Python's `str.strip()` (Jinja's `trim`): Unicode whitespace plus U+001C…U+001F.
    static func trim(_ s: String) -> String {
        func isSpace(_ u: Unicode.Scalar) -> Bool { u.properties.isWhitespace || (0x1C...0x1F).contains(u.value) }
        let v = s.unicodeScalars
        guard let first = v.firstIndex(where: { !isSpace($0) }) else { return "" }
        let last = v.lastIndex(where: { !isSpace($0) })!
        return String(v[first...last])
    }

    /// Gemma 4's `strip_thinking`: drops every `<|channel>…<channel|>` span, then trims.
    static func stripThinking(_ s: String) -> String {
        var result = ""
        for part in s.splitScalars("<channel|>") {
            result += part.splitScalars("<|channel>")[0]
        }
        return trim(result)
    }
}
