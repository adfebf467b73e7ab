import Dispatch
import GraphIR
import Tokenizers
import Interpreter
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a generation produced, with timings.
public struct GenerationResult {
    public var promptIDs: [Int32]
    public var tokenIDs: [Int32]
    /// Why it stopped: "stop_token", "max_tokens", "context_full", "callback".
    public var stopReason: String
    public var prefillSeconds: Double
    public var decodeSeconds: Double
    /// Decode steps run (the first generated token comes from the prefill).
    public var decodeSteps: Int

    public var prefillTokensPerSecond: Double { prefillSeconds > 0 ? Double(promptIDs.count) / prefillSeconds : 0 }
    public var decodeTokensPerSecond: Double { decodeSeconds > 0 ? Double(decodeSteps) / decodeSeconds : 0 }
}

/// Errors of the generation driver.
public struct GenerationError: Error, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { description = d }
}

/// Drives a stateful LLM through its own I/O contract (``LLMContract``): builds masks and
/// positions, prefills the prompt in chunks, decodes one token per call, samples, stops on stop
/// tokens, and never runs past the context length.
public final class Generator {
    public let session: Session
    public let contract: LLMContract
    /// Extra constant inputs bound once (e.g. a per-layer embedding table), by name.
    public var boundInputs: [String: Tensor] = [:]
    /// Largest prefill chunk (nil: as wide as the graph allows). 1 = token-by-token prefill.
    public var prefillChunk: Int?

    public init(session: Session) throws {
        self.session = session
        contract = try LLMContract(function: session.function)
    }

    /// Tokens written to the KV cache so far.
    public private(set) var position = 0

    public func reset() {
        session.states.reset()
        position = 0
    }

    /// One call: `ids` (at most the chunk width) written at the current position; returns the
    /// logits row of the last real token. Pads to `width` with token 0 when the graph needs it
    /// (padding rows are masked from every real row and later overwritten).
    func step(_ ids: [Int32], width: Int) throws -> [Float] {
        let n = ids.count, ctx = contract.contextLength
        guard let w = callWidth(n, padded: width) else {
            throw GenerationError("context full: \(position) + \(n) tokens (in a call of \(width)) exceed the model's context length \(ctx)")
        }
        var padded = ids
        padded += [Int32](repeating: 0, count: w - n)
        var inputs = boundInputs
        for (k, v) in contract.inputs(ids: padded, position: position) { inputs[k] = v }
        // Only the last real token's logits are used: compute just that row when the graph allows.
        let plan = session.plan
        let oneRow = plan.canSelectRow(of: contract.logitsName)
        if oneRow { try plan.selectRow(n - 1, of: contract.logitsName) }
        defer { if oneRow { try? plan.selectRow(nil, of: contract.logitsName) } }
        let out = try session.predict(inputs)
        defer { plan.recycle(out) }
        guard let logits = out[contract.logitsName] else { throw GenerationError("model returned no '\(contract.logitsName)'") }
        let rows = oneRow ? 1 : w
        guard logits.rank == 3, logits.shape[1] == rows else {
            throw GenerationError("logits have shape \(logits.shape), expected [1, \(rows), vocab]")
        }
        position += n
        let vocab = logits.shape[2]
        let f = logits.floats
        let r = oneRow ? 0 : n - 1
        return Array(f[(r * vocab)..<((r + 1) * vocab)])
    }

    /// Throws when a token id is outside the model's vocabulary (a tokenizer that is not the
    /// model's own): the graph would otherwise fail deep inside its embedding `gather`, after
    /// its own int casts have wrapped the id.
    public func checkVocabulary(_ ids: [Int32]) throws {
        guard let vocab = contract.vocabularySize(in: session.function), let bad = ids.first(where: { $0 < 0 || Int($0) >= vocab }) else { return }
        throw GenerationError("token id \(bad) is outside the model's vocabulary (0..<\(vocab), from its \(contract.logitsName) output); is the tokenizer the model's own?")
    }

    /// The width of a call writing `n` tokens at the current position: `width` (padded) when
    /// it fits in the context, else the narrowest width of at least `n` that the graph accepts
    /// and that fits; nil when there is none (a fixed-width graph near the end of its context).
    func callWidth(_ n: Int, padded width: Int) -> Int? {
        let room = contract.contextLength - position
        if width <= room { return width }
        guard n <= room else { return nil }
        return (n...room).first { contract.accepts(width: $0) }
    }

    /// Prefills `ids` (in chunks) and returns the last row's logits.
    /// - Throws: `GenerationError` for ids outside the vocabulary or past the context.
    public func prefill(_ ids: [Int32]) throws -> [Float] {
        try checkVocabulary(ids)
        var rest = ids[...]
        var last: [Float] = []
        while !rest.isEmpty {
            let (take, width) = contract.chunk(for: rest.count, limit: prefillChunk)
            last = try step(Array(rest.prefix(take)), width: width)
            rest = rest.dropFirst(take)
        }
        return last
    }

    /// Generates up to `maxTokens` tokens after `prompt`.
    /// - Parameters:
    ///   - stop: token ids that end generation (not included in the result).
    ///   - onToken: called with each generated token as it comes; return false to stop.
    /// - Throws: `GenerationError` when the prompt does not fit the context, `InterpreterError`
    ///   from the model.
    public func generate(prompt: [Int32], maxTokens: Int, sampling: SamplingOptions = SamplingOptions(),
                         stop: Set<Int32> = [], onToken: (Int32) -> Bool = { _ in true }) throws -> GenerationResult {
        guard !prompt.isEmpty else { throw GenerationError("empty prompt: give at least one token") }
        try checkVocabulary(prompt)
        let ctx = contract.contextLength
        guard prompt.count < ctx else {
            throw GenerationError("the prompt has \(prompt.count) tokens; the model's context holds \(ctx), leaving no room to generate")
        }
        reset()
        var sampler = Sampler(sampling)
        var history = prompt
        var generated: [Int32] = []
        var t0 = DispatchTime.now().uptimeNanoseconds
        var logits = try prefill(prompt)
        let prefillSeconds = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
        var reason = "max_tokens"
        var steps = 0
        t0 = DispatchTime.now().uptimeNanoseconds
        let (_, decodeWidth) = contract.chunk(for: 1, limit: 1)
        while generated.count < maxTokens {
            let next = sampler.next(logits, history: history)
            if stop.contains(next) { reason = "stop_token"; break }
            generated.append(next)
            history.append(next)
            if !onToken(next) { reason = "callback"; break }
            if generated.count >= maxTokens { break }
            if callWidth(1, padded: decodeWidth) == nil { reason = "context_full"; break }
            logits = try step([next], width: decodeWidth)
            steps += 1
        }
        let decodeSeconds = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
        return GenerationResult(promptIDs: prompt, tokenIDs: generated, stopReason: reason,
                                prefillSeconds: prefillSeconds, decodeSeconds: decodeSeconds, decodeSteps: steps)
    }
}

/// Peak resident memory of this process so far, in bytes (getrusage).
public func peakResidentBytes() -> Int {
    var usage = rusage()
    #if os(Linux)
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Int(usage.ru_maxrss) * 1024
    #else
    getrusage(RUSAGE_SELF, &usage)
    return Int(usage.ru_maxrss)
    #endif
}
