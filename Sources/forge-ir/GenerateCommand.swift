import Foundation
import Generation
import GraphIR
import Interpreter
import JSON
import Tokenizers

/// `forge-ir generate MODEL [--tokenizer tokenizer.json|DIR] (--prompt TEXT | --chat TEXT | --messages F.json | --prompt-ids 1,2,3)
/// [--system TEXT] [--template auto|NAME|FILE.jinja] [--template-var K=V]... [--print-prompt] [--hide-reasoning]
/// [--max-tokens N] [--temperature T] [--top-k K] [--top-p P] [--repetition-penalty R] [--seed S] [--prefill-chunk N]
/// [--precision fp32|fp16] [--json]`
enum GenerateCommand: Command {
    static let spec = CommandSpec(
        name: "generate", reads: .llm,
        about: """
        Generate text with a stateful LLM package through its own input contract.

        Streams text to stdout as it is generated (with a tokenizer; ids otherwise) and ends with
        a timing line on stderr: prompt: N tokens, X tok/s · generation: M tokens, Y tok/s.
        A reasoning span the template's model writes (Gemma 4's <|channel>thought … <channel|>,
        <think> … </think>) is printed between [reasoning] and [/reasoning] lines, apart from the
        answer (--hide-reasoning leaves it out); --json gives it as "reasoning".
        """,
        options: [
            .option("tokenizer", value: "tokenizer.json", "Hugging Face tokenizer.json, or its folder (its tokenizer_config.json is read too)."),
            .option("prompt", value: "text", "Raw prompt text (no template)."),
            .option("chat", value: "text", "A user message, wrapped in the chat template."),
            .option("messages", value: "chat.json", "A chat as JSON ([{\"role\": …, \"content\": …}, …]), wrapped in the chat template."),
            .option("system", value: "text", "System message for --chat."),
            .option("template", value: "name|file", "Chat template: auto (the tokenizer's own chat_template, else the built-in its vocabulary points to), "
                    + ChatTemplate.builtinNames.joined(separator: ", ") + ", a named template of the tokenizer's config, or a .jinja file (default: auto)."),
            .option("template-var", value: "key=value", "A variable for the chat template, e.g. enable_thinking=true (value read as JSON, else as text; repeatable)."),
            .option("prompt-ids", value: "1,2,3", "Prompt as token ids (no tokenizer needed)."),
            .int("max-tokens", "Tokens to generate (default 64).", range: 0...Int.max),
            .float("temperature", value: "t", "0 = greedy (default 0)."),
            .int("top-k", value: "k", "Sample among the k most likely tokens (default 0 = off).", range: 0...Int.max),
            .float("top-p", value: "p", "Nucleus sampling threshold (default 1 = off)."),
            .float("repetition-penalty", value: "r", "Penalty for tokens already seen (default 1 = off)."),
            .int("seed", "Random seed for sampling (default 0).", range: 0...Int.max),
            .intList("stop-ids", value: "1,2", "Extra token ids that stop generation.", range: 0...Int(Int32.max)),
            .int("prefill-chunk", "Largest prefill call (1 = token by token; default: the graph's widest).", range: 1...Int.max),
            CommonOptions.function,
            .flag("print-prompt", "Print the prompt (the rendered chat template text; ids for --prompt-ids) and exit without running the model."),
            .flag("hide-reasoning", "Leave the reasoning span (Gemma 4's thought channel, <think>…</think>) out of the printed text."),
            .flag("json", "Print prompt_ids, token_ids, text, reasoning, response, tokens/s and peak memory as JSON."),
            .flag("profile", "Print time per op type (stderr)."),
        ],
        groups: [.contract, .kernels]
    )

    static func parseIDs(_ s: String, option: String) throws -> [Int32] {
        if let k = ArgumentParser.emptyEntry(s) {
            throw UsageError(message: "--\(option) has an empty entry at position \(k) of '\(s)'")
        }
        let parts = s.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        return try parts.map { p in
            guard let v = Int32(p), v >= 0 else {
                throw UsageError(message: "--\(option) takes comma-separated non-negative token ids, got '\(p)'")
            }
            return v
        }
    }

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let sampling = try samplingOptions(args)
        try checkPromptOptions(args)
        let text = try TextCodec.load(args)
        let p = try buildPrompt(args, text: text)
        if args.flag("print-prompt") {
            printPrompt(p, json: args.flag("json"))
            return ExitCode.ok
        }
        let model = try ModelLoader.load(path: args.positionals[0])
        let generator = try ContractOption.generator(args, model: model, precision: args.precision)
        if args.flag("profile") { for s in generator.sessions { s.plan.profile = [:] } }
        if let n = args.int("prefill-chunk") { generator.prefillChunk = n }
        let json = args.flag("json")
        var stream = text?.streamingDecoder()
        var printer = ReasoningPrinter(hide: args.flag("hide-reasoning"))
        var router: ReasoningRouter?
        if let text, let template = p.template, let markers = template.reasoning {
            router = ReasoningRouter(tokenizer: text.tokenizer, markers: markers,
                                     startInReasoning: p.text.map(template.promptOpensReasoning) ?? false)
        }
        let result = try generator.generate(prompt: p.ids, maxTokens: args.int("max-tokens", default: 64), sampling: sampling, stop: p.stop) { id in
            if router != nil {
                let pieces = router!.push(Int(id))
                if !json { printer.print(pieces) }
            } else if !json {
                if stream != nil { Console.out(stream!.push(id)) } else { Console.out("\(id) ") }
            }
            return true
        }
        if router != nil {
            let pieces = router!.finish()
            if !json { printer.print(pieces); printer.end() }
        }
        if !json {
            if router == nil, stream != nil { Console.out(stream!.finish()) }
            Console.out("\n")
        }
        report(result, prompt: p.ids, text: text, router: router, generator: generator, args: args)
        return ExitCode.ok
    }

    /// `--temperature`, `--top-k`, `--top-p`, `--repetition-penalty`, `--seed`, checked.
    static func samplingOptions(_ args: ParsedArguments) throws -> SamplingOptions {
        var sampling = SamplingOptions()
        sampling.temperature = args.float("temperature", default: 0)
        sampling.topK = args.int("top-k", default: 0)
        sampling.topP = args.float("top-p", default: 1)
        sampling.repetitionPenalty = args.float("repetition-penalty", default: 1)
        guard sampling.temperature >= 0, sampling.temperature.isFinite else {
            throw UsageError(message: "--temperature must be ≥ 0 (0 = greedy), not \(sampling.temperature)")
        }
        guard sampling.topP > 0, sampling.topP <= 1 else {
            throw UsageError(message: "--top-p must be in (0, 1] (1 = off), not \(sampling.topP)")
        }
        guard sampling.repetitionPenalty > 0, sampling.repetitionPenalty.isFinite else {
            throw UsageError(message: "--repetition-penalty must be > 0 (1 = off), not \(sampling.repetitionPenalty)")
        }
        sampling.seed = UInt64(args.int("seed", default: 0))
        return sampling
    }

    /// Exactly one prompt form; the chat options only with a chat prompt.
    static func checkPromptOptions(_ args: ParsedArguments) throws {
        for option in ["template", "template-var"] where !args.values(of: option).isEmpty && args.value("chat") == nil && args.value("messages") == nil {
            throw UsageError(message: "--\(option) applies to --chat and --messages only")
        }
        if args.value("system") != nil && args.value("chat") == nil {
            throw UsageError(message: "--system applies to --chat only")
        }
        let given = ["prompt", "chat", "messages", "prompt-ids"].filter { args.value($0) != nil }
        guard given.count == 1 else {
            throw UsageError(message: "give exactly one of --prompt, --chat, --messages, --prompt-ids")
        }
    }

    /// The prompt's ids, its text (nil for `--prompt-ids`), the chat template used and the stop ids.
    struct Prompt {
        var ids: [Int32]
        var text: String?
        var template: ChatTemplate?
        var stop: Set<Int32>
    }

    static func buildPrompt(_ args: ParsedArguments, text: TextCodec?) throws -> Prompt {
        var p = Prompt(ids: [], text: nil, template: nil, stop: Set((args.ints("stop-ids") ?? []).map { Int32($0) }))
        if let ids = args.value("prompt-ids") {
            p.ids = try parseIDs(ids, option: "prompt-ids")
        } else {
            guard let text else {
                throw UsageError(message: "--prompt, --chat and --messages need --tokenizer")
            }
            if args.value("chat") != nil || args.value("messages") != nil {
                let messages = try chatMessages(args)
                let t = try text.chatTemplate(args.value("template") ?? "auto")
                let encoded = try text.encodeChat(messages, template: t, variables: try templateVariables(args))
                p.ids = encoded.ids
                p.text = encoded.text
                p.stop.formUnion(encoded.stopIDs)
                p.template = t
            } else {
                p.text = args.value("prompt")!
                p.ids = try text.encode(args.value("prompt")!)
            }
        }
        if let text { p.stop.formUnion(text.defaultStopIDs) }
        return p
    }

    /// `--print-prompt`: the rendered prompt (text, else ids), or its JSON.
    static func printPrompt(_ p: Prompt, json: Bool) {
        if json {
            var obj: [String: JSONValue] = [
                "prompt_ids": .array(p.ids.map { .int(Int($0)) }),
                "prompt": p.text.map { .string($0) } ?? .null,
                "template": p.template.map { .string($0.name) } ?? .null,
                "stop_ids": .array(p.stop.sorted().map { .int(Int($0)) }),
            ]
            if let r = p.template?.reasoning { obj["reasoning_markers"] = .array([.string(r.open), .string(r.close)]) }
            Console.out(JSONValue.object(obj).render(pretty: true) + "\n")
        } else {
            Console.out(p.text ?? p.ids.map(String.init).joined(separator: ","))
            if p.text == nil { Console.out("\n") }
        }
    }

    /// The speed summary on stderr, the `--json` result on stdout, and `--profile`'s tables.
    static func report(_ result: GenerationResult, prompt: [Int32], text: TextCodec?, router: ReasoningRouter?,
                       generator: Generator, args: ParsedArguments) {
        let peak = peakResidentBytes()
        var summary = String(format: "prompt: %d tokens, %.1f tok/s · generation: %d tokens, %.1f tok/s",
                             prompt.count, result.prefillTokensPerSecond, result.tokenIDs.count, result.decodeTokensPerSecond)
        if result.stopReason == "context_full" {
            summary += " · stopped: the model's context (\(generator.contract.contextLength) tokens) is full"
        }
        if args.flag("json") {
            var obj: [String: JSONValue] = [
                "prompt_ids": .array(prompt.map { .int(Int($0)) }),
                "token_ids": .array(result.tokenIDs.map { .int(Int($0)) }),
                "stop_reason": .string(result.stopReason),
                "prefill_tok_s": .double(result.prefillTokensPerSecond),
                "decode_tok_s": .double(result.decodeTokensPerSecond),
                "prefill_seconds": .double(result.prefillSeconds),
                "decode_seconds": .double(result.decodeSeconds),
                "peak_rss_bytes": .int(peak),
            ]
            obj["text"] = text.map { .string($0.decode(result.tokenIDs)) } ?? .null
            // the answer apart from the reasoning span (no span: the whole text, reasoning null)
            if let router {
                obj["response"] = .string(router.response)
                obj["reasoning"] = router.sawReasoning ? .string(router.reasoning) : .null
            } else {
                obj["response"] = obj["text"]
                obj["reasoning"] = .null
            }
            Console.out(JSONValue.object(obj).render(pretty: true) + "\n")
        }
        Console.err(summary + "\n")
        if args.flag("profile") {
            for s in generator.sessions {
                if generator.sessions.count > 1 { Console.err("function \(s.function.name):\n") }
                Console.err(s.plan.profileReport())
            }
        }
    }
}

extension GenerateCommand {
    /// `--chat` (with `--system`) or `--messages FILE.json` (every field of a message is passed
    /// to the template, in the file's order).
    static func chatMessages(_ args: ParsedArguments) throws -> [JinjaValue] {
        if let chat = args.value("chat") {
            var messages: [ChatMessage] = []
            if let system = args.value("system") { messages.append(.system(system)) }
            messages.append(.user(chat))
            return messages.map(\.jinjaValue)
        }
        let file = args.value("messages")!
        // (GenerationError, not TokenizerError: the file is a chat, not a tokenizer.json)
        let data: Data
        do { data = try SafeFile.read(file, limit: 64 << 20) } catch let f as SafeFile.Failure {
            throw GenerationError("\(file): cannot read the chat file (\(f.reason))")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw GenerationError("\(file): the chat file is not UTF-8 text")
        }
        let parsed: JinjaValue
        do { parsed = try JinjaValue.parseJSON(text) } catch let e as JinjaError {
            throw GenerationError("\(file): the chat file, line \(e.line): \(e.message)")
        }
        guard case let .array(list) = parsed, !list.isEmpty else {
            throw GenerationError("\(file): the chat file must be a non-empty JSON list of {\"role\": …, \"content\": …} objects")
        }
        for (i, m) in list.enumerated() {
            guard case let .object(o) = m, case .string? = o["role"], o["content"] != nil else {
                throw GenerationError("\(file): message [\(i)] must be an object with a string \"role\" and a \"content\"")
            }
        }
        return list
    }

    /// `--template-var key=value`: the value as JSON when it parses (true, 3, "x", [..]), else text.
    static func templateVariables(_ args: ParsedArguments) throws -> [String: JinjaValue] {
        var vars: [String: JinjaValue] = [:]
        for kv in args.values(of: "template-var") {
            guard let eq = kv.firstIndex(of: "="), eq != kv.startIndex else {
                throw UsageError(message: "--template-var takes key=value, got '\(kv)'")
            }
            let key = String(kv[..<eq]), raw = String(kv[kv.index(after: eq)...])
            vars[key] = (try? JinjaValue.parseJSON(raw)) ?? .string(raw)
        }
        return vars
    }
}

/// Prints routed text: reasoning between `[reasoning]` / `[/reasoning]` lines (or not at all),
/// the response as it comes.
struct ReasoningPrinter {
    let hide: Bool
    private var inReasoning = false

    init(hide: Bool) { self.hide = hide }

    mutating func print(_ pieces: [(ReasoningRouter.Channel, String)]) {
        for (channel, text) in pieces {
            switch channel {
            case .reasoning:
                if hide { continue }
                if !inReasoning { Console.out("[reasoning]\n"); inReasoning = true }
                Console.out(text)
            case .response:
                end()
                Console.out(text)
            }
        }
    }

    /// Closes an open reasoning block.
    mutating func end() {
        if inReasoning { Console.out("\n[/reasoning]\n"); inReasoning = false }
    }
}
