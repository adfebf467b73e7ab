import GraphIR
import Interpreter

extension GenerationContract {
    /// Detects the contract of `model` from its signature and graph.
    ///
    /// - Token ids: the int [1, S] input the embedding `gather` reads (through casts /
    ///   reshapes); else the only int [1, S] input. A second int [1, S] input: positions.
    /// - Write offset: an int [1] input; else, when the mask's last dimension is a RangeDim
    ///   (END) the graph reads through `shape`, `END − S`.
    /// - Mask: a float or bool rank-4 input [1, 1, S, X]; X fixed = a CTX window, else END;
    ///   else a rank-2 input named `…mask…` (Hugging Face's `attention_mask`: a padding mask).
    /// - KV: state inputs (rank 5 = stacked [L, 1, H, CTX, D], else per layer); without
    ///   states, float inputs whose shape an output has too (caches in, updated caches out);
    ///   without either, no write offset and logits as wide as the embedding table: no KV
    ///   cache (``KVLayout/none``, the whole sequence per call).
    /// - Functions: `function` if given; else, when the model has an S = 1 function and a
    ///   fixed S > 1 function with the same states, that prefill/decode pair; else the default.
    /// - Throws: ``GenerationError`` with one line: the roles found, those missing, and the
    ///   `--contract FILE.json` hint.
    public static func detect(model: Model, function name: String? = nil) throws -> GenerationContract {
        if name == nil, let pair = try detectPair(model) { return pair }
        let fname = name ?? model.defaultFunctionName
        guard let f = model.program.function(named: fname) else {
            throw GenerationError("no function '\(fname)' (the model has: \(model.program.functions.map(\.name).joined(separator: ", ")))")
        }
        var c = try detect(function: f)
        c.source = "detected"
        return c
    }

    /// The recipe the contract looks like, for `dump`.
    public var recipeName: String {
        switch (kv, functions, writeOffset) {
        case (.none, _, _): return "no KV cache (the whole sequence per call)"
        case (.explicit, _, _): return "explicit KV inputs/outputs"
        case (_, .prefillDecode, _): return "prefill/decode multifunction"
        case (.stackedStates, _, .fromMaskShape): return "Apple Llama 3.1 (growing mask, stacked KV states)"
        case (.stackedStates, _, _): return "stacked KV states"
        case (.perLayerStates, _, _): return "per-layer KV states"
        }
    }

    static func detectPair(_ model: Model) throws -> GenerationContract? {
        let fs = model.program.functions
        guard fs.count >= 2 else { return nil }
        var singles: [(Function, GenerationContract)] = []
        for f in fs { if let c = try? detect(function: f) { singles.append((f, c)) } }
        func stateSig(_ f: Function) -> [String] { f.stateInputs.map { "\($0.name):\($0.type)" }.sorted() }
        guard let dec = singles.first(where: { $0.1.prefill.width == .fixed(1) && !$0.0.stateInputs.isEmpty }),
              let pre = singles.first(where: { p in
                  if case let .fixed(w) = p.1.prefill.width, w > 1 { return stateSig(p.0) == stateSig(dec.0) }
                  return false
              }) else { return nil }
        var c = dec.1
        c.functions = .prefillDecode(prefill: pre.0.name, prefillWidth: pre.1.prefill.width, decode: dec.0.name)
        c.source = "detected"
        return c
    }

    /// Detection on one function (see ``detect(model:function:)``).
    public static func detect(function f: Function) throws -> GenerationContract {
        var found: [String] = [], missing: [String] = []
        let inputs = f.inputs.filter { !$0.type.isState }
        func tensor(_ v: Value) -> TensorType? { v.type.tensorType }
        let users = userMap(f)

        // Token ids and positions: int [1, S] (an input named …mask… is a padding mask).
        func isMaskName(_ v: Value) -> Bool { v.name.lowercased().contains("mask") }
        let intRows = inputs.filter { v in !isMaskName(v) && (tensor(v).map { $0.dtype.isInteger && $0.rank == 2 } ?? false) }
        // The embedding table is the largest table gathered from (vocab rows; a position
        // table has CTX rows).
        let tables = intRows.map { gatheredRows($0, users: users) }
        let best = tables.max() ?? 0
        let ids: Value? = intRows.count == 1 ? intRows[0]
            : (best > 0 && tables.filter { $0 == best }.count == 1 ? intRows[tables.firstIndex(of: best)!] : intRows.first { v in
                let n = v.name.lowercased()
                return n.contains("input") || n.contains("token")
            })
        if let ids { found.append("token ids '\(ids.name)'") } else { missing.append("token ids (an int32 [1, S] input)") }
        let posInput = intRows.first { $0 !== ids }

        // Mask: rank-4 float or bool input.
        let maskValue = inputs.first { v in
            guard let t = tensor(v), t.rank == 4, t.dtype.isFloat || t.dtype == .bool else { return false }
            return t.shape[0].fixedValue == 1 && t.shape[1].fixedValue == 1
        }
        var mask: Mask?
        if let m = maskValue, let t = tensor(m) {
            let growing = t.shape[3].fixedValue == nil
            mask = Mask(name: m.name, dtype: t.dtype, window: growing ? .growing : .fixed,
                        maskedValue: growing ? -.infinity : -1e4)
            found.append("mask '\(m.name)' \(growing ? "[1, 1, S, END]" : "[1, 1, S, CTX]")")
        }
        let paddingMask = maskValue == nil ? inputs.first { v in isMaskName(v) && (tensor(v).map { $0.rank == 2 && $0.shape[0].fixedValue == 1 } ?? false) } : nil

        // Write offset.
        let offInput = inputs.first { v in tensor(v).map { $0.dtype.isInteger && $0.rank == 1 } ?? false }
        var offset: WriteOffset?
        if let o = offInput {
            offset = .input(o.name); found.append("write offset '\(o.name)'")
        } else if let m = mask, m.window == .growing, let mv = maskValue,
                  users[ObjectIdentifier(mv)]?.contains(where: { $0.type == "shape" }) ?? false {
            offset = .fromMaskShape; found.append("write offset = \(m.name).shape[-1] − S")
        }

        // KV (a write offset is missing only when there is a cache to write).
        let offsetMissingAt = missing.count
        var kv: KVLayout?
        var ctx: Int?
        let states = f.stateInputs.compactMap { v in v.type.stateWrappedTensor.map { (v, $0) } }
        let logitsValue = f.outputs.first { $0.name == "logits" }
            ?? f.outputs.first { tensor($0).map { $0.rank == 3 && $0.dtype.isFloat } ?? false }
        if !states.isEmpty {
            let stacked = states.allSatisfy { $0.1.rank == 5 }
            kv = stacked ? .stackedStates(states.map(\.0.name)) : .perLayerStates(states.map(\.0.name))
            ctx = states.compactMap { $0.1.rank >= 2 ? $0.1.shape[$0.1.rank - 2].fixedValue : nil }.max()
            found.append("\(states.count) \(stacked ? "stacked" : "per-layer") KV state\(states.count == 1 ? "" : "s")")
        } else {
            var pairs: [KVLayout.Pair] = []
            var used = Set<String>()
            for v in inputs where v !== maskValue && v !== ids && v !== posInput && v !== offInput {
                guard let t = tensor(v), t.dtype.isFloat, t.rank >= 4, t.shape.allSatisfy(\.isFixed) else { continue }
                let outs = f.outputs.filter { o in o !== logitsValue && !used.contains(o.name) && tensor(o)?.shape == t.shape }
                let out = outs.first { $0.name.hasPrefix(v.name) || v.name.hasPrefix($0.name) } ?? outs.first
                if let out { pairs.append(KVLayout.Pair(input: v.name, output: out.name)); used.insert(out.name) }
            }
            if !pairs.isEmpty {
                kv = .explicit(pairs)
                ctx = pairs.compactMap { p -> Int? in
                    guard let t = inputs.first(where: { $0.name == p.input }).flatMap(tensor) else { return nil }
                    return t.shape[t.rank - 2].fixedValue
                }.max()
                found.append("\(pairs.count) KV cache input/output pair\(pairs.count == 1 ? "" : "s")")
            } else if offInput == nil, let ids, let logitsValue, let vocab = tensor(logitsValue)?.shape.last?.fixedValue,
                      vocab == gatheredRows(ids, users: users) {
                // Logits over the embedding table's rows and nowhere to keep K and V: the graph
                // recomputes the sequence per call.
                kv = KVLayout.none
                found.append("no KV cache (the whole sequence per call)")
                if let p = paddingMask, let t = tensor(p) {
                    mask = Mask(name: p.name, dtype: t.dtype, window: .padding, maskedValue: 0)
                    found.append("padding mask '\(p.name)' [1, S]")
                }
                ctx = tensor(ids).flatMap { t -> Int? in
                    switch GenerationContract.width(of: t, context: Int.max) {
                    case let .fixed(n): return n
                    case let .enumerated(sizes): return sizes.max()
                    case let .range(_, hi): return hi == Int.max ? nil : hi
                    }
                }
            } else {
                missing.append("KV cache (states, or cache inputs returned as outputs of the same shape)")
            }
        }
        if case .none? = kv { offset = WriteOffset.none } else if offset == nil {
            missing.insert("write offset (an int32 [1] input, or a [1, 1, S, END] mask the graph reads the shape of)", at: offsetMissingAt)
        }
        if let m = mask, m.window == .fixed, let t = maskValue.flatMap(tensor), let x = t.shape[3].fixedValue { ctx = x }
        if let logitsValue { found.append("logits '\(logitsValue.name)'") } else { missing.append("logits (a float [1, S, vocab] output)") }

        guard missing.isEmpty, let ids, let offset, let kv, let logitsValue else {
            throw GenerationError("function '\(f.name)' fits no known generation recipe: found \(found.isEmpty ? "nothing" : found.joined(separator: ", ")); missing \(missing.joined(separator: ", ")); give the roles with --contract FILE.json (README: Generation contracts)")
        }
        guard let context = ctx ?? tensor(ids).map({ widthUpper($0) }) ?? nil else {
            throw GenerationError("function '\(f.name)': cannot tell the context length (no fixed mask window, no KV state shape); give context_length with --contract FILE.json (README: Generation contracts)")
        }
        let positions: Positions = posInput.map { .input($0.name) } ?? (offset == .fromMaskShape ? .fromMaskEnd : .fromWriteOffset)
        let known = Set([ids.name, mask?.name, posInput?.name, offInput?.name].compactMap { $0 })
        var kvInputs = Set<String>()
        if case let .explicit(p) = kv { kvInputs = Set(p.map(\.input)) }
        let statics = inputs.filter { !known.contains($0.name) && !kvInputs.contains($0.name) }.map(\.name)
        let width = GenerationContract.width(of: tensor(ids)!, context: context)
        return GenerationContract(tokenIDs: ids.name, positions: positions, mask: mask, writeOffset: offset, kv: kv,
                                  functions: .single(f.name, width), logits: logitsValue.name, contextLength: context,
                                  staticInputs: statics, source: "detected")
    }

    /// Whether `f` looks like a language model, for messages: it has states, or a float output
    /// whose last dimension is the row count of a table an int [1, S] input gathers from (logits
    /// over the vocabulary). An encoder (`last_hidden_state` [1, S, 384]) does not.
    public static func looksLikeLanguageModel(_ f: Function) -> Bool {
        if !f.stateInputs.isEmpty { return true }
        let users = userMap(f)
        let rows = Set(f.inputs.filter { $0.type.tensorType.map { $0.dtype.isInteger && $0.rank == 2 } ?? false }
            .map { gatheredRows($0, users: users) }.filter { $0 > 1 })
        return f.outputs.contains { o in
            o.type.tensorType.map { $0.dtype.isFloat && $0.shape.last?.fixedValue.map(rows.contains) == true } ?? false
        }
    }

    static func widthUpper(_ t: TensorType) -> Int? {
        guard t.rank == 2, case let .symbol(s) = t.shape[1], case let .range(_, hi) = s.constraint else { return nil }
        return hi
    }

    static func userMap(_ f: Function) -> [ObjectIdentifier: [Op]] {
        var users: [ObjectIdentifier: [Op]] = [:]
        f.body.walk { op in for v in op.operandValues { users[ObjectIdentifier(v), default: []].append(op) } }
        return users
    }

    /// The most rows of a table `v` indexes: the first dimension of each `gather`'s `x` that
    /// `v` reaches as `indices` through cast / reshape / squeeze / expand_dims / add / select
    /// chains (≤ 8 ops); 0 when none.
    static func gatheredRows(_ v: Value, users: [ObjectIdentifier: [Op]]) -> Int {
        var frontier = [v], seen = Set<ObjectIdentifier>()
        var rows = 0
        for _ in 0..<8 {
            var next: [Value] = []
            for x in frontier where seen.insert(ObjectIdentifier(x)).inserted {
                for op in users[ObjectIdentifier(x)] ?? [] {
                    if op.type == "gather" || op.type == "gather_along_axis", op.operand("indices")?.value === x {
                        rows = max(rows, op.operand("x")?.type.tensorType?.shape.first?.fixedValue ?? 1)
                        continue
                    }
                    if ["cast", "reshape", "squeeze", "expand_dims", "add", "select", "less", "greater_equal", "mul", "identity"].contains(op.type) {
                        next += op.outputs
                    }
                }
            }
            frontier = next
        }
        return rows
    }
}
