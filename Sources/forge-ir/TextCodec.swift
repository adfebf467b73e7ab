import Foundation
import GraphIR
import Tokenizers

/// The tokenizer, its `tokenizer_config.json` and the chat template as `generate` uses them.
struct TextCodec {
    let tokenizer: Tokenizer
    let path: String
    /// The `tokenizer_config.json` next to `tokenizer.json`, when there is one.
    let config: TokenizerConfig?

    /// Loads `--tokenizer` if given (a `tokenizer.json`, or a folder holding one), and the
    /// `tokenizer_config.json` beside it.
    static func load(_ args: ParsedArguments) throws -> TextCodec? {
        guard var path = args.value("tokenizer") else { return nil }
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDir), isDir.boolValue {
            path = (path as NSString).appendingPathComponent("tokenizer.json")
        }
        // A regular file of at most 512 MiB (a FIFO or device is refused, never read).
        let data: Data
        do { data = try SafeFile.read(path, limit: min(512 << 20, MemoryBudget.limit)) } catch let f as SafeFile.Failure {
            throw TokenizerError.unreadable(file: path, reason: f.reason)
        }
        return TextCodec(tokenizer: try Tokenizer(data: data, file: path), path: path, config: try TokenizerConfig.beside(tokenizerFile: path))
    }

    /// End-of-text tokens the tokenizer defines (`<|endoftext|>`, `<eos>`, `</s>`) stop generation.
    var defaultStopIDs: Set<Int32> {
        var ids = Set<Int32>()
        for t in ["<|endoftext|>", "<eos>", "</s>", "<|end_of_text|>"] {
            if let id = tokenizer.tokenToId(t) { ids.insert(Int32(id)) }
        }
        if let eos = config?.specialTokens["eos_token"], let id = tokenizer.tokenToId(eos) { ids.insert(Int32(id)) }
        return ids
    }

    /// Raw text, with the tokenizer's own special tokens (e.g. `<bos>`) added.
    func encode(_ s: String) throws -> [Int32] { tokenizer.encode(s).map { Int32($0) } }

    /// The chat template `--template` names: `auto` (the tokenizer's own `chat_template`, else
    /// the built-in its vocabulary points to), a named template of the tokenizer's config, a
    /// built-in name, or a `.jinja` file.
    func chatTemplate(_ name: String) throws -> ChatTemplate {
        let names = "auto, " + ChatTemplate.builtinNames.joined(separator: ", ") + ", or a .jinja file"
        if name == "auto" {
            if let config, let t = try ChatTemplate(config: config, tokenizer: tokenizer) { return t }
            if let t = ChatTemplate.detect(for: tokenizer) { return withConfigTokens(t) }
            throw UsageError(message: "\(path): no chat template: no tokenizer_config.json with a chat_template beside it, and the vocabulary "
                                 + "has none of the built-in templates' tokens; pass --template (\(names))")
        }
        if let config, config.chatTemplates[name] != nil, let t = try ChatTemplate(config: config, name: name, tokenizer: tokenizer) {
            return t
        }
        if let t = ChatTemplate.named(name) { return withConfigTokens(t.resolvingSpecialTokens(with: tokenizer)) }
        var isDir: ObjCBool = false
        if name.hasSuffix(".jinja") || (FileManager.default.fileExists(atPath: name, isDirectory: &isDir) && !isDir.boolValue) {
            guard let data = FileManager.default.contents(atPath: name), let source = String(data: data, encoding: .utf8) else {
                throw TokenizerError.unreadable(file: name, reason: "cannot read the chat template (a UTF-8 .jinja file)")
            }
            return try ChatTemplate(inferringFrom: source, name: (name as NSString).lastPathComponent, specialTokens: config?.specialTokens ?? [:],
                                    additionalSpecialTokens: config?.additionalSpecialTokens ?? [], stopIds: config?.generationEOSIds ?? [],
                                    tokenizer: tokenizer)
        }
        let own = config.map { $0.chatTemplates.keys.sorted() } ?? []
        throw UsageError(message: "unknown chat template '\(name)' (templates: \(names)\(own.isEmpty ? "" : "; the tokenizer's: " + own.joined(separator: ", ")))")
    }

    /// A built-in template with the model's own special tokens when its config has them.
    private func withConfigTokens(_ t: ChatTemplate) -> ChatTemplate {
        guard let config else { return t }
        var t = t
        for (k, v) in config.specialTokens { t.specialTokens[k] = v }
        t.stopIds = config.generationEOSIds
        return t
    }

    /// The rendered prompt of `messages`, its ids and the template's stop ids.
    func encodeChat(_ messages: [JinjaValue], template: ChatTemplate, variables: [String: JinjaValue]) throws
        -> (text: String, ids: [Int32], stopIDs: Set<Int32>)
    {
        let text = try template.render(messages: messages, addGenerationPrompt: true, variables: variables)
        let ids = tokenizer.encode(text, addSpecialTokens: false).map { Int32($0) }
        let stops = (try? template.stopTokenIds(using: tokenizer)) ?? []
        return (text, ids, Set(stops.map { Int32($0) }))
    }

    func decode(_ ids: [Int32]) -> String { tokenizer.decode(ids.map(Int.init), skipSpecialTokens: true) }

    func streamingDecoder() -> Stream { Stream(decoder: tokenizer.streamingDecoder(skipSpecialTokens: true)) }

    struct Stream {
        var decoder: StreamingDecoder
        mutating func push(_ id: Int32) -> String { decoder.push(Int(id)) }
        mutating func finish() -> String { decoder.finish() }
    }
}
