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

/// Drives an LLM package through its generation contract (``GenerationContract``): builds the
/// contract's inputs (token ids, positions, write offset, mask, explicit caches), prefills the
/// prompt in chunks (the `prefill` function of a prefill/decode pair), decodes one token per
/// call, samples, stops on stop tokens, and never runs past the context length.
public final class Generator {
    /// The session that decodes (for a prefill/decode pair, the `decode` function's).
    public let session: Session
    /// The session that prefills: `session` itself, or the pair's `prefill` function on the
    /// same states.
    public let prefillSession: Session
    public let contract: GenerationContract
    /// Extra constant inputs passed with every call, by name (in-memory tensors; a table file
    /// is better bound with ``bind(_:to:)``, which maps it once and never copies it).
    public var boundInputs: [String: Tensor] = [:]
    /// Per-token inputs filled from mapped tables (provider mode), one per provided input.
    public var providers: [TableRowProvider] = []
    /// Largest prefill chunk (nil: as wide as the graph allows). 1 = token-by-token prefill.
    public var prefillChunk: Int?
    /// Explicit KV caches (contracts without states): the last call's cache outputs.
    var caches: [String: Tensor] = [:]
    /// The tokens so far, for a model without a KV cache (``GenerationContract/KVLayout/none``):
    /// every call takes them all again.
    var sequence: [Int32] = []

    /// - Parameters:
    ///   - contract: nil = detected from the session's model and function.
    ///   - carryCaches: for explicit KV caches (``GenerationContract/KVLayout/explicit``) of a
    ///     one-function contract, run the session's function again planned to carry them
    ///     (``ExecutionPlan/carried``: each call writes only the new rows into one buffer in
    ///     place and hands it back as the next call's cache, no copies; ``session`` is then that
    ///     new session, on the same model, precision and activations; not when the given plan has
    ///     bound inputs or observers). Pairs whose graph does not
    ///     match run as before (the cache output fed back as the next input); `--profile` says
    ///     why (`carried_cache`). False: always as before.
    /// - Throws: `GenerationError` when no contract fits (one line naming the roles found and
    ///   missing), `InterpreterError` when the pair's other function cannot be planned.
    public init(session: Session, contract given: GenerationContract? = nil, carryCaches: Bool = true) throws {
        let c: GenerationContract
        if let given { c = given } else {
            let whole = try? GenerationContract.detect(model: session.model)
            if let whole, whole.functions.names.contains(session.function.name) { c = whole } else {
                c = try GenerationContract.detect(function: session.function)
            }
        }
        contract = c
        switch c.functions {
        case let .single(f, _):
            guard f == session.function.name else {
                throw GenerationError("the contract drives function '\(f)', the session runs '\(session.function.name)'")
            }
            var s = session
            // (Not when the caller set up the given plan: bound inputs or observers stay on it.)
            if carryCaches, case let .explicit(pairs) = c.kv, !pairs.isEmpty, session.plan.carried.isEmpty,
               session.plan.boundInputNames.isEmpty, session.plan.observer == nil, session.plan.valueObserver == nil {
                var carrying: [String: String] = [:]
                for p in pairs { carrying[p.input] = p.output }
                s = try Session(model: session.model, function: f, precision: session.precision, observing: session.plan.observing,
                                activations: session.plan.activations, carrying: carrying)
                if session.plan.profile != nil { s.plan.profile = [:] }
            }
            self.session = s
            prefillSession = s
        case .prefillDecode where c.kv == .none:
            throw GenerationError("a contract without a KV cache (kv \"none\") drives one function, not a prefill/decode pair")
        case let .prefillDecode(pre, _, dec):
            func other(_ name: String) throws -> Session {
                name == session.function.name ? session
                    : try Session(model: session.model, function: name, precision: session.precision, sharing: session.states,
                                  activations: session.plan.activations)
            }
            self.session = try other(dec)
            prefillSession = try other(pre)
        }
    }

    /// Every distinct session (one, or the prefill and decode pair).
    public var sessions: [Session] { prefillSession === session ? [session] : [prefillSession, session] }

    /// Binds a mapped table to input `name` of every session's function that takes it, once
    /// for the generator's life (``ExecutionPlan/bind(_:to:)``: int8 and fp16 files are read in
    /// place, never copied per call or step).
    /// - Throws: `InterpreterError.badInput` when the file's dtype or shape does not fit the
    ///   declared input, `GenerationError` when no session's function takes `name` or when
    ///   `name` is an input the contract fills every call (``GenerationContract/perCallInputs``:
    ///   the generator's value would win and the table be silently ignored).
    public func bind(_ name: String, to array: MappedArray) throws {
        if let role = contract.perCallInputs.first(where: { $0.input == name }) {
            throw GenerationError("'\(name)' is the contract's \(role.role) input, fed per call, not a constant table (static input \(array.path))")
        }
        var bound = false
        for s in sessions where s.function.inputs.contains(where: { $0.name == name }) {
            try s.plan.bind(name, to: array)
            bound = true
        }
        if !bound {
            throw GenerationError("no function the generator runs has an input '\(name)' (static input \(array.path))")
        }
    }

    /// Adds a provider after checking it against every session's function.
    /// - Throws: `GenerationError` naming the input and both shapes.
    public func add(_ provider: TableRowProvider) throws {
        for s in sessions { try provider.check(against: s.function) }
        providers.append(provider)
    }

    /// The static inputs of the contract that nothing feeds yet (not bound, not in
    /// ``boundInputs``, not provided), with the function that takes them.
    public var unfedStaticInputs: [(function: Function, input: Value)] {
        var out: [(Function, Value)] = []
        for s in sessions {
            let fed = Set(s.plan.boundInputNames).union(boundInputs.keys).union(providers.map(\.input))
            for v in s.function.inputs where contract.staticInputs.contains(v.name) && !fed.contains(v.name) {
                if !out.contains(where: { $0.1.name == v.name }) { out.append((s.function, v)) }
            }
        }
        return out
    }

    /// Tokens written to the KV cache so far.
    public private(set) var position = 0

    public func reset() {
        session.states.reset()
        for s in sessions { for b in s.carried.values { b.reset() } }
        caches = [:]
        sequence = []
        position = 0
    }

    /// One call of `on`: `ids` written at the current position; returns the logits row of the
    /// last real token. Pads to `width` with token 0 when the graph needs it (padding rows are
    /// masked from every real row and later overwritten). Without a KV cache the call takes
    /// the whole sequence (`ids` appended) from position 0.
    func step(_ new: [Int32], width w: Int, on s: Session) throws -> [Float] {
        let recompute = contract.kv == .none
        let ids = recompute ? sequence + new : new
        let start = recompute ? 0 : position
        let n = ids.count
        var padded = ids
        padded += [Int32](repeating: 0, count: w - n)
        var inputs = boundInputs
        let carried = s.plan.carried
        for (k, v) in try contract.inputs(ids: padded, position: start, function: s.function, caches: caches, real: n,
                                          omitting: Set(carried.keys)) { inputs[k] = v }
        for p in providers { inputs[p.input] = try p.value(ids: padded, for: s.function) }
        // Only the last real token's logits are used: compute just that row when the graph allows.
        let plan = s.plan, logitsName = contract.logits
        let oneRow = plan.canSelectRow(of: logitsName)
        if oneRow { try plan.selectRow(n - 1, of: logitsName) }
        defer { if oneRow { try? plan.selectRow(nil, of: logitsName) } }
        var out = try s.predict(inputs)
        if case let .explicit(pairs) = contract.kv {
            for p in pairs where carried[p.input] == nil {
                guard let t = out.removeValue(forKey: p.output) else { throw GenerationError("model returned no cache output '\(p.output)'") }
                caches[p.input] = t
            }
        }
        defer { plan.recycle(out) }
        guard let logits = out[logitsName] else { throw GenerationError("model returned no '\(logitsName)'") }
        let rows = oneRow ? 1 : w
        guard logits.rank == 3, logits.shape[1] == rows else {
            throw GenerationError("logits have shape \(logits.shape), expected [1, \(rows), vocab]")
        }
        position = start + n
        if recompute { sequence = ids }
        let vocab = logits.shape[2]
        let f = logits.floats
        let r = oneRow ? 0 : n - 1
        return Array(f[(r * vocab)..<((r + 1) * vocab)])
    }

    /// Throws when a token id is outside the model's vocabulary (a tokenizer that is not the
    /// model's own): the graph would otherwise fail deep inside its embedding `gather`, after
    /// its own int casts have wrapped the id.
    public func checkVocabulary(_ ids: [Int32]) throws {
        guard let vocab = contract.vocabularySize(in: session.model), let bad = ids.first(where: { $0 < 0 || Int($0) >= vocab }) else { return }
        throw GenerationError("token id \(bad) is outside the model's vocabulary (0..<\(vocab), from its \(contract.logits) output); is the tokenizer the model's own?")
    }

    /// The next call for `n` pending tokens: the session, how many tokens it takes and its
    /// (padded) width; nil when none fits the context left.
    func nextCall(_ n: Int) -> (session: Session, take: Int, width: Int)? {
        let room = contract.contextLength - position
        guard n >= 1, room >= 1 else { return nil }
        if contract.kv == .none {
            // One call of the whole sequence: the narrowest width that holds it.
            let total = position + n
            guard total <= contract.contextLength else { return nil }
            let width = contract.prefill.width
            let w: Int?
            switch width {
            case let .range(lo, hi): w = total <= hi ? max(total, lo) : nil
            case let .enumerated(sizes): w = sizes.sorted().first { $0 >= total }
            case let .fixed(f): w = f >= total ? f : nil
            }
            return w.map { (session, n, $0) }
        }
        switch contract.functions {
        case let .single(_, width):
            let (take, w) = GenerationContract.chunk(width, for: n, limit: prefillChunk)
            if w <= room { return (session, take, w) }
            guard take <= room else {
                // Fewer tokens in a narrower call, if the graph takes one.
                guard let narrow = (1...room).reversed().first(where: { width.admits($0) }) else { return nil }
                return (session, min(n, narrow), narrow)
            }
            guard let fit = (take...room).first(where: { width.admits($0) }) else { return nil }
            return (session, take, fit)
        case let .prefillDecode(_, pw, _):
            let w = pw.widest
            if n > 1, w <= room, prefillChunk.map({ $0 >= w }) ?? true { return (prefillSession, min(n, w), w) }
            return (session, 1, 1)
        }
    }

    /// Prefills `ids` (in chunks) and returns the last row's logits.
    /// - Throws: `GenerationError` for ids outside the vocabulary or past the context.
    public func prefill(_ ids: [Int32]) throws -> [Float] {
        try checkVocabulary(ids)
        var rest = ids[...]
        var last: [Float] = []
        while !rest.isEmpty {
            guard let call = nextCall(rest.count) else {
                throw GenerationError("context full: \(position) + \(rest.count) tokens exceed the model's context length \(contract.contextLength) (or no call width of the graph fits what is left)")
            }
            last = try step(Array(rest.prefix(call.take)), width: call.width, on: call.session)
            rest = rest.dropFirst(call.take)
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
        while generated.count < maxTokens {
            let next = sampler.next(logits, history: history)
            if stop.contains(next) { reason = "stop_token"; break }
            generated.append(next)
            history.append(next)
            if !onToken(next) { reason = "callback"; break }
            if generated.count >= maxTokens { break }
            guard let call = nextCall(1) else { reason = "context_full"; break }
            logits = try step([next], width: call.width, on: call.session)
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
