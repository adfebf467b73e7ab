import Foundation
import GraphIR
import Tokenizers
import Interpreter
import Generation

/// `forge-ir generate MODEL [--tokenizer tokenizer.json] (--prompt TEXT | --chat TEXT | --prompt-ids 1,2,3)
/// [--system TEXT] [--max-tokens N] [--temperature T] [--top-k K] [--top-p P]
/// [--repetition-penalty R] [--seed S] [--prefill-chunk N] [--precision fp32|fp16] [--json]`
enum GenerateCommand: Command {
    static let spec = CommandSpec(
        name: "generate",
        summary: "Generate text with a stateful LLM package through its own input contract.",
        positionals: [PositionalSpec(name: "model", help: ".mlpackage or .mlmodelc of a stateful LLM (input_ids, causal_mask, position_ids, cache_offset → logits).")],
        options: [
            .option("tokenizer", value: "tokenizer.json", "Hugging Face tokenizer (byte-level BPE)."),
            .option("prompt", value: "text", "Raw prompt text (no template)."),
            .option("chat", value: "text", "A user message, wrapped in the chat template."),
            .option("system", value: "text", "System message for --chat."),
            .option("template", value: "name", "Chat template: auto (from the tokenizer), chatml, smollm2, qwen2, qwen2.5, gemma4 (default: auto)."),
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
            CommonOptions.precision,
            CommonOptions.threads,
            .flag("json", "Print prompt_ids, token_ids, text, tokens/s and peak memory as JSON."),
            .flag("profile", "Print time per op type (stderr)."),
            CommonOptions.maxMemory,
        ],
        discussion: """
        Streams text to stdout as it is generated (with a tokenizer; ids otherwise) and ends with
        a timing line on stderr: prompt: N tokens, X tok/s · generation: M tokens, Y tok/s.
        """
    )

    static func parseIDs(_ s: String, option: String) throws -> [Int32] {
        let parts = s.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        return try parts.map { p in
            guard let v = Int32(p), v >= 0 else {
                throw UsageError(message: "--\(option) takes comma-separated non-negative token ids, got '\(p)'")
            }
            return v
        }
    }

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let path = args.positionals[0]
        let precision = args.precision
        let maxTokens = args.int("max-tokens", default: 64)
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
        for option in ["template", "system"] where args.value(option) != nil && args.value("chat") == nil {
            throw UsageError(message: "--\(option) applies to --chat only")
        }
        let given = ["prompt", "chat", "prompt-ids"].filter { args.value($0) != nil }
        guard given.count == 1 else {
            throw UsageError(message: "give exactly one of --prompt, --chat, --prompt-ids")
        }
        let text = try TextCodec.load(args)
        var stop = Set((args.ints("stop-ids") ?? []).map { Int32($0) })
        let prompt: [Int32]
        if let ids = args.value("prompt-ids") {
            prompt = try parseIDs(ids, option: "prompt-ids")
        } else {
            guard let text else {
                throw UsageError(message: "--prompt and --chat need --tokenizer")
            }
            if let chat = args.value("chat") {
                let encoded = try text.encodeChat(user: chat, system: args.value("system"), template: args.value("template") ?? "auto")
                prompt = encoded.ids
                stop.formUnion(encoded.stopIDs)
            } else {
                prompt = try text.encode(args.value("prompt")!)
            }
        }
        if let text { stop.formUnion(text.defaultStopIDs) }

        let model = try ModelLoader.load(path: path)
        let session = try Session(model: model, function: args.value("function"), precision: precision)
        let generator = try Generator(session: session)
        if args.flag("profile") { session.plan.profile = [:] }
        if let n = args.int("prefill-chunk") { generator.prefillChunk = n }
        for extra in generator.contract.extraInputs {
            throw InterpreterError.unsupported("function '\(session.function.name)' also takes input '\(extra.name)' (\(extra.type)); bind it with forge-ir's library API (Generator.boundInputs)")
        }
        let json = args.flag("json")
        var stream = text?.streamingDecoder()
        let result = try generator.generate(prompt: prompt, maxTokens: maxTokens, sampling: sampling, stop: stop) { id in
            if !json {
                if stream != nil { Console.out(stream!.push(id)) } else { Console.out("\(id) ") }
            }
            return true
        }
        if !json {
            if stream != nil { Console.out(stream!.finish()) }
            Console.out("\n")
        }
        let peak = peakResidentBytes()
        var summary = String(format: "prompt: %d tokens, %.1f tok/s · generation: %d tokens, %.1f tok/s",
                             prompt.count, result.prefillTokensPerSecond, result.tokenIDs.count, result.decodeTokensPerSecond)
        if result.stopReason == "context_full" {
            summary += " · stopped: the model's context (\(generator.contract.contextLength) tokens) is full"
        }
        if json {
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
            Console.out(JSONValue.object(obj).render(pretty: true) + "\n")
        }
        Console.err(summary + "\n")
        if args.flag("profile") { Console.err(session.plan.profileReport()) }
        return ExitCode.ok
    }
}
