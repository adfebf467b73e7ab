import Foundation
import GraphIR
import Tokenizers

/// The tokenizer and chat template as `generate` uses them.
struct TextCodec {
    let tokenizer: Tokenizer
    let path: String

    /// Loads `--tokenizer` if given.
    static func load(_ args: ParsedArguments) throws -> TextCodec? {
        guard let path = args.value("tokenizer") else { return nil }
        // A regular file of at most 512 MiB (a FIFO or device is refused, never read).
        let data: Data
        do { data = try SafeFile.read(path, limit: min(512 << 20, MemoryBudget.limit)) } catch let f as SafeFile.Failure {
            throw TokenizerError.unreadable(file: path, reason: f.reason)
        }
        return TextCodec(tokenizer: try Tokenizer(data: data, file: path), path: path)
    }

    /// End-of-text tokens the tokenizer defines (`<|endoftext|>`, `<eos>`, `</s>`) stop generation.
    var defaultStopIDs: Set<Int32> {
        var ids = Set<Int32>()
        for t in ["<|endoftext|>", "<eos>", "</s>", "<|end_of_text|>"] {
            if let id = tokenizer.tokenToId(t) { ids.insert(Int32(id)) }
        }
        return ids
    }

    /// Raw text, with the tokenizer's own special tokens (e.g. `<bos>`) added.
    func encode(_ s: String) throws -> [Int32] { tokenizer.encode(s).map { Int32($0) } }

    /// A user message (and optional system message) in the chat template; its stop tokens.
    func encodeChat(user: String, system: String?, template name: String) throws -> (ids: [Int32], stopIDs: Set<Int32>) {
        let template: ChatTemplate
        if name == "auto" {
            template = ChatTemplate.detect(for: tokenizer) ?? .chatML
        } else {
            guard let t = ChatTemplate.named(name) else {
                throw UsageError(message: "unknown chat template '\(name)' (templates: auto, \(ChatTemplate.all.map(\.name).joined(separator: ", ")))")
            }
            template = t
        }
        var messages: [ChatMessage] = []
        if let system { messages.append(.system(system)) }
        messages.append(.user(user))
        let ids = template.encode(messages, addGenerationPrompt: true, using: tokenizer).map { Int32($0) }
        let stops = try template.stopTokenIds(using: tokenizer).map { Int32($0) }
        return (ids, Set(stops))
    }

    func decode(_ ids: [Int32]) -> String { tokenizer.decode(ids.map(Int.init), skipSpecialTokens: true) }

    func streamingDecoder() -> Stream { Stream(decoder: tokenizer.streamingDecoder(skipSpecialTokens: true)) }

    struct Stream {
        var decoder: StreamingDecoder
        mutating func push(_ id: Int32) -> String { decoder.push(Int(id)) }
        mutating func finish() -> String { decoder.finish() }
    }
}
