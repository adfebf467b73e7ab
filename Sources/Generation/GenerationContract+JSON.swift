import Foundation
import GraphIR
import Interpreter
import JSON

/// The `--contract FILE.json` schema (README "Generation contracts"); every key is optional and
/// overrides what detection found (when detection fails, the keys it could not fill are needed):
///
/// ```json
/// { "function": "main",                       // or "prefill": "prefill", "decode": "decode"
///   "token_ids": "inputIds",
///   "positions": {"input": "position_ids"},   // or "from_write_offset", "from_mask_end"
///   "mask": {"input": "causalMask", "window": "growing", "masked_value": "-inf"},  // or null; window "fixed", "padding" ([1, S] attention_mask); bool masks by dtype
///   "write_offset": {"input": "cache_offset"},// or "from_mask_shape", {"state": "pos"}, "none" (no KV cache)
///   "kv": {"states": ["keyCache", "valueCache"]},  // or {"pairs": [["key_cache", "key_cache_out"]]}, "none" (the whole sequence per call)
///   "logits": "logits",
///   "context_length": 2048,
///   "static_inputs": ["per_layer_table"],     // or {"ple_table": "ple_table.npy", "ple_scale": "s.bin:fp32:262144"}
///   "provider": {"input": "per_layer_raw", "table": "t.bin:int8:262144,8960", "scale": "s.npy", "rows_by": "input_ids"} }
/// ```
/// File paths are taken from the contract file's folder when relative.
extension GenerationContract {
    /// Reads a contract file for `model`.
    /// - Throws: `GenerationError` naming the file and the key that is malformed or missing.
    public init(contentsOf path: String, model: Model) throws {
        let data: Data
        do { data = try SafeFile.read(path, limit: 16 << 20) } catch let f as SafeFile.Failure {
            throw GenerationError("\(path): cannot read the contract file (\(f.reason))")
        }
        guard let text = String(data: data, encoding: .utf8) else { throw GenerationError("\(path): the contract file is not UTF-8 text") }
        let json: JSONValue
        do { json = try JSONValue.parse(text) } catch { throw GenerationError("\(path): \(error)") }
        try self.init(json: json, model: model, file: path)
    }

    public init(json: JSONValue, model: Model, file: String = "contract") throws {
        var r = try ContractFileReader(json: json, model: model, file: file)
        let tokenIDs = try r.tokenIDs()
        let mask = try r.mask()
        let offset = try r.writeOffset()
        let positions = try r.positions(offset: offset)
        let kv = try r.kv()
        let logits = try r.logits()
        let ctx = try r.contextLength(kv: kv, mask: mask)
        var (statics, staticFiles) = try r.staticInputs()
        let provider = try r.provider(tokenIDs: tokenIDs)
        if let provider { statics.removeAll { $0 == provider.input } }
        guard r.missing.isEmpty, let tokenIDs, let offset, let positions, let kv, let logits, let ctx else {
            throw GenerationError("\(file): detection could not fill \(r.missing.joined(separator: ", ")); give \(r.missing.count == 1 ? "it" : "them") in the file")
        }
        try r.checkConstantsAreNoRoles(statics: r.o["static_inputs"] == nil ? [] : statics, provider: provider?.input,
                                       roles: [("token_ids", tokenIDs), ("mask", mask?.name)]
                                           + [positions].compactMap { if case let .input(n) = $0 { return ("positions", n) } else { return nil } }
                                           + [offset].compactMap { if case let .input(n) = $0 { return ("write_offset", n) } else { return nil } }
                                           + { if case let .explicit(p) = kv { return p.map { ("kv", $0.input) } } else { return [] } }())
        self.init(tokenIDs: tokenIDs, positions: positions, mask: mask, writeOffset: offset, kv: kv,
                  functions: try r.functions(tokenIDs: tokenIDs, context: ctx),
                  logits: logits, contextLength: ctx, staticInputs: statics, source: "file \(file)")
        staticInputFiles = staticFiles
        self.provider = provider
    }

    /// The contract as the JSON schema above (plus "source" and "recipe"), for `dump --json`.
    public var json: JSONValue {
        var o: [String: JSONValue] = ["token_ids": .string(tokenIDs), "logits": .string(logits),
                                      "context_length": .int(contextLength), "source": .string(source),
                                      "recipe": .string(recipeName),
                                      "static_inputs": .array(staticInputs.map { .string($0) })]
        switch functions {
        case let .single(f, w): o["function"] = .string(f); o["width"] = .string(w.description)
        case let .prefillDecode(p, w, d):
            o["prefill"] = .string(p); o["decode"] = .string(d); o["width"] = .string("prefill \(w), decode S = 1")
        }
        switch positions {
        case let .input(n): o["positions"] = .object(["input": .string(n)])
        case .fromWriteOffset: o["positions"] = .string("from_write_offset")
        case .fromMaskEnd: o["positions"] = .string("from_mask_end")
        }
        if let m = mask {
            o["mask"] = .object(["input": .string(m.name), "dtype": .string(m.dtype.rawValue),
                                 "window": .string(m.window.name),
                                 "masked_value": m.isBoolean ? .null : (m.maskedValue.isInfinite ? .string("-inf") : .double(Double(m.maskedValue)))])
        } else { o["mask"] = .null }
        switch writeOffset {
        case let .input(n): o["write_offset"] = .object(["input": .string(n)])
        case .fromMaskShape: o["write_offset"] = .string("from_mask_shape")
        case let .state(n): o["write_offset"] = .object(["state": .string(n)])
        case .none: o["write_offset"] = .string("none")
        }
        switch kv {
        case let .perLayerStates(n): o["kv"] = .object(["states": .array(n.map { .string($0) }), "layout": .string("per_layer_states")])
        case let .stackedStates(n): o["kv"] = .object(["states": .array(n.map { .string($0) }), "layout": .string("stacked_states")])
        case let .explicit(p): o["kv"] = .object(["pairs": .array(p.map { .array([.string($0.input), .string($0.output)]) }), "layout": .string("explicit")])
        case .none: o["kv"] = .object(["layout": .string("none")])
        }
        if !staticInputFiles.isEmpty { o["static_input_files"] = .object(staticInputFiles.mapValues { .string($0) }) }
        if let p = provider {
            o["provider"] = .object(["input": .string(p.input), "table": .string(p.table), "scale": p.scale.map { .string($0) } ?? .null,
                                     "rows_by": .string(p.rowsBy)])
        }
        return .object(o)
    }

    /// Lines for `dump --summary`.
    public var summaryLines: [String] {
        var l = ["generation contract (\(source)): \(recipeName)"]
        switch functions {
        case let .single(f, w): l.append("  function: \(f) (\(w))")
        case let .prefillDecode(p, w, d): l.append("  functions: prefill '\(p)' (\(w)) + decode '\(d)' (S = 1), shared states")
        }
        l.append("  token ids: \(tokenIDs)")
        switch positions {
        case let .input(n): l.append("  positions: input \(n)")
        case .fromWriteOffset where writeOffset == .none: l.append("  positions: derived by the graph (0 … S − 1 in every call)")
        case .fromWriteOffset: l.append("  positions: derived by the graph from the write offset")
        case .fromMaskEnd: l.append("  positions: derived by the graph from the mask's last dimension")
        }
        if let m = mask {
            let value = m.isBoolean ? "boolean (true attends)" : "additive \(m.dtype), masked \(m.maskedValue.isInfinite ? "-inf" : String(format: "%g", m.maskedValue))"
            switch m.window {
            case .fixed: l.append("  mask: \(m.name) [1, 1, S, \(contextLength)] fixed window, \(value)")
            case .growing: l.append("  mask: \(m.name) [1, 1, S, END] growing, END = past + S, \(value)")
            case .padding: l.append("  mask: \(m.name) [1, S] padding (1 = token, 0 = padding), \(m.dtype)")
            }
        } else { l.append("  mask: none") }
        switch writeOffset {
        case let .input(n): l.append("  write offset: input \(n)")
        case .fromMaskShape: l.append("  write offset: \(mask?.name ?? "mask").shape[-1] - S")
        case let .state(n): l.append("  write offset: state \(n)")
        case .none: l.append("  write offset: none")
        }
        switch kv {
        case let .perLayerStates(n): l.append("  KV: \(n.count) per-layer states [1, H, \(contextLength), D]")
        case let .stackedStates(n): l.append("  KV: stacked states \(n.joined(separator: ", ")) [L, 1, H, \(contextLength), D]")
        case let .explicit(p): l.append("  KV: explicit inputs/outputs \(p.map { "\($0.input) -> \($0.output)" }.joined(separator: ", "))")
        case .none: l.append("  KV: none (every call recomputes the sequence from position 0)")
        }
        l.append("  logits: \(logits) · context: \(contextLength)")
        if !staticInputs.isEmpty {
            l.append("  static inputs (bind once): " + staticInputs.map { n in staticInputFiles[n].map { "\(n) = \($0)" } ?? n }.joined(separator: ", "))
        }
        if let p = provider {
            l.append("  provider: \(p.input) = rows of \(p.table)\(p.scale.map { " × \($0)" } ?? "") by \(p.rowsBy)")
        }
        return l
    }
}

/// Reads one contract file key by key against the model (``GenerationContract/init(json:model:file:)``):
/// each role starts from what detection found and the file's key overrides it.
struct ContractFileReader {
    let o: JSONObject
    let model: Model
    let file: String
    /// The function the roles are checked against (the decode function of a pair).
    let f: Function
    let base: GenerationContract?
    let fname: String?, pre: String?, dec: String?
    /// Roles neither detection nor the file gave.
    var missing: [String] = []

    init(json: JSONValue, model: Model, file: String) throws {
        guard case let .object(o) = json else { throw GenerationError("\(file): the contract must be a JSON object") }
        let known: Set<String> = ["function", "prefill", "decode", "token_ids", "positions", "mask", "write_offset", "kv",
                                  "logits", "context_length", "static_inputs", "provider"]
        if let unknown = o.keys.sorted().first(where: { !known.contains($0) }) {
            throw GenerationError("\(file): unknown key \"\(unknown)\" (known: \(known.sorted().joined(separator: ", ")))")
        }
        self.o = o
        self.model = model
        self.file = file
        let fname = try Self.string(o, "function", file), pre = try Self.string(o, "prefill", file), dec = try Self.string(o, "decode", file)
        if (pre == nil) != (dec == nil) { throw GenerationError("\(file): give both \"prefill\" and \"decode\", or neither") }
        let base: GenerationContract?
        if let pre, let dec {
            for n in [pre, dec] where model.program.function(named: n) == nil {
                throw GenerationError("\(file): no function '\(n)' (the model has: \(model.program.functions.map(\.name).joined(separator: ", ")))")
            }
            base = (try? GenerationContract.detect(function: model.program.function(named: dec)!))
        } else {
            let n = fname ?? model.defaultFunctionName
            guard let f = model.program.function(named: n) else {
                throw GenerationError("\(file): no function '\(n)' (the model has: \(model.program.functions.map(\.name).joined(separator: ", ")))")
            }
            base = fname == nil ? (try? GenerationContract.detect(model: model)) : (try? GenerationContract.detect(function: f))
        }
        (self.fname, self.pre, self.dec, self.base) = (fname, pre, dec, base)
        f = model.program.function(named: dec ?? fname ?? base?.decodeFunction ?? model.defaultFunctionName)!
    }

    func bad(_ key: String, _ expected: String) -> GenerationError {
        GenerationError("\(file): \"\(key)\" must be \(expected)")
    }

    func string(_ k: String) throws -> String? { try Self.string(o, k, file) }

    /// `o[k]` as a string (nil when absent); usable before `self` is initialised.
    static func string(_ o: JSONObject, _ k: String, _ file: String) throws -> String? {
        guard let v = o[k] else { return nil }
        guard let s = v.stringValue else { throw GenerationError("\(file): \"\(k)\" must be a string") }
        return s
    }

    /// `name`, checked to be an input of the function.
    func input(_ name: String, _ key: String) throws -> String {
        guard f.inputs.contains(where: { $0.name == name }) else {
            throw GenerationError("\(file): \"\(key)\": function '\(f.name)' has no input '\(name)'")
        }
        return name
    }

    mutating func tokenIDs() throws -> String? {
        let tokenIDs = try string("token_ids").map { try input($0, "token_ids") } ?? base?.tokenIDs
        if tokenIDs == nil { missing.append("token_ids") }
        return tokenIDs
    }

    func mask() throws -> GenerationContract.Mask? {
        var mask = base?.mask
        if let m = o["mask"] {
            switch m {
            case .null: mask = nil
            case let .object(mo):
                guard let name = mo["input"]?.stringValue else { throw bad("mask", "null or an object with \"input\"") }
                _ = try input(name, "mask")
                guard let t = f.inputs.first(where: { $0.name == name })?.type.tensorType else { throw bad("mask", "a tensor input") }
                let window: GenerationContract.Mask.Window
                switch mo["window"]?.stringValue ?? (t.rank == 2 ? "padding" : t.rank == 4 && t.shape[3].isFixed ? "fixed" : "growing") {
                case "fixed": window = .fixed
                case "growing": window = .growing
                case "padding": window = .padding
                default: throw bad("mask.window", "\"fixed\", \"growing\" or \"padding\"")
                }
                let rank = window == .padding ? 2 : 4
                guard t.rank == rank else {
                    throw GenerationError("\(file): \"mask\": input '\(name)' has rank \(t.rank); a \(window.name) mask has rank \(rank)")
                }
                var masked: Float = window == .growing ? -.infinity : window == .padding ? 0 : -1e4
                switch mo["masked_value"] {
                case nil: break
                case let .int(i)?: masked = Float(i)
                case let .double(d)? where Float(d).isFinite: masked = Float(d)
                case let .string(s)? where s == "-inf": masked = -.infinity
                default: throw bad("mask.masked_value", "a number within fp32's range or \"-inf\"")
                }
                mask = GenerationContract.Mask(name: name, dtype: t.dtype, window: window, maskedValue: masked)
            default: throw bad("mask", "null or an object with \"input\"")
            }
        }
        return mask
    }

    mutating func writeOffset() throws -> GenerationContract.WriteOffset? {
        var offset = base?.writeOffset
        if let w = o["write_offset"] {
            switch w {
            case .string("from_mask_shape"): offset = .fromMaskShape
            case .string("none"): offset = GenerationContract.WriteOffset.none
            case let .object(wo) where wo["input"]?.stringValue != nil: offset = .input(try input(wo["input"]!.stringValue!, "write_offset"))
            case let .object(wo) where wo["state"]?.stringValue != nil:
                let n = wo["state"]!.stringValue!
                guard f.stateInputs.contains(where: { $0.name == n }) else {
                    throw GenerationError("\(file): \"write_offset\": function '\(f.name)' has no state '\(n)' (states: \(f.stateInputs.map(\.name).joined(separator: ", ")))")
                }
                offset = .state(n)
            default: throw bad("write_offset", "{\"input\": NAME}, \"from_mask_shape\", {\"state\": NAME} or \"none\"")
            }
        }
        if offset == nil { missing.append("write_offset") }
        return offset
    }

    func positions(offset: GenerationContract.WriteOffset?) throws -> GenerationContract.Positions? {
        var positions = base?.positions
        if let p = o["positions"] {
            switch p {
            case .string("from_write_offset"): positions = .fromWriteOffset
            case .string("from_mask_end"): positions = .fromMaskEnd
            case let .object(po) where po["input"]?.stringValue != nil: positions = .input(try input(po["input"]!.stringValue!, "positions"))
            default: throw bad("positions", "{\"input\": NAME}, \"from_write_offset\" or \"from_mask_end\"")
            }
        }
        if positions == nil { positions = offset == .fromMaskShape ? .fromMaskEnd : .fromWriteOffset }
        return positions
    }

    mutating func kv() throws -> GenerationContract.KVLayout? {
        var kv = base?.kv
        if let k = o["kv"] {
            if k == .string("none") || k["layout"] == .string("none") {
                kv = GenerationContract.KVLayout.none
            } else if let names = k["states"]?.arrayValue {
                let n = try names.map { v -> String in
                    guard let s = v.stringValue, f.stateInputs.contains(where: { $0.name == s }) else {
                        throw bad("kv.states", "names of state inputs of function '\(f.name)'")
                    }
                    return s
                }
                let stacked = n.allSatisfy { s in f.stateInputs.first { $0.name == s }?.type.stateWrappedTensor?.rank == 5 }
                kv = stacked ? .stackedStates(n) : .perLayerStates(n)
            } else if let pairs = k["pairs"]?.arrayValue {
                kv = .explicit(try pairs.map { p in
                    guard let a = p.arrayValue, a.count == 2, let i = a[0].stringValue, let out = a[1].stringValue else {
                        throw bad("kv.pairs", "a list of [input, output] name pairs")
                    }
                    guard f.outputs.contains(where: { $0.name == out }) else {
                        throw GenerationError("\(file): \"kv.pairs\": function '\(f.name)' has no output '\(out)'")
                    }
                    return GenerationContract.KVLayout.Pair(input: try input(i, "kv.pairs"), output: out)
                })
            } else {
                throw bad("kv", "{\"states\": [...]}, {\"pairs\": [[input, output], ...]} or \"none\"")
            }
        }
        if kv == nil { missing.append("kv") }
        return kv
    }

    mutating func logits() throws -> String? {
        var logits = base?.logits
        if let l = try string("logits") {
            guard f.outputs.contains(where: { $0.name == l }) else { throw GenerationError("\(file): \"logits\": function '\(f.name)' has no output '\(l)'") }
            logits = l
        }
        if logits == nil { missing.append("logits") }
        return logits
    }

    /// The file's `context_length` (at most what the cache holds, so that no call allocates a
    /// mask or window beyond the model), else detection's.
    mutating func contextLength(kv: GenerationContract.KVLayout?, mask: GenerationContract.Mask?) throws -> Int? {
        var ctx = base?.contextLength
        if let c = o["context_length"] {
            guard let n = c.intValue, n >= 1 else { throw bad("context_length", "a whole number ≥ 1") }
            if let cap = capacity(kv: kv, mask: mask), n > cap {
                throw GenerationError("\(file): \"context_length\" \(n) is more than the \(cap) tokens the model's KV cache and mask hold (their shapes in function '\(f.name)')")
            }
            ctx = n
        }
        if ctx == nil { missing.append("context_length") }
        return ctx
    }

    /// The most tokens the cache holds: the KV states' or cache inputs' sequence axis (the
    /// largest, as detection reads it), and a fixed mask window's width; nil when no fixed
    /// shape tells.
    func capacity(kv: GenerationContract.KVLayout?, mask: GenerationContract.Mask?) -> Int? {
        func seqAxis(_ t: TensorType?) -> Int? { t.flatMap { $0.rank >= 2 ? $0.shape[$0.rank - 2].fixedValue : nil } }
        var caps: [Int] = []
        switch kv {
        case let .perLayerStates(n)?, let .stackedStates(n)?:
            caps += [n.compactMap { s in seqAxis(f.stateInputs.first { $0.name == s }?.type.stateWrappedTensor) }.max()].compactMap { $0 }
        case let .explicit(p)?:
            caps += [p.compactMap { pair in seqAxis(f.inputs.first { $0.name == pair.input }?.type.tensorType) }.max()].compactMap { $0 }
        case .none?, nil: break
        }
        if let m = mask, m.window == .fixed, let t = f.inputs.first(where: { $0.name == m.name })?.type.tensorType,
           t.rank == 4, let w = t.shape[3].fixedValue {
            caps.append(w)
        }
        return caps.min()
    }

    /// A static input or the provider's input is a constant the host binds or fills: none can
    /// be an input a role feeds per call (the token ids, the mask, …).
    func checkConstantsAreNoRoles(statics: [String], provider: String?, roles: [(String, String?)]) throws {
        for (key, n) in statics.map({ ("static_inputs", $0) }) + [provider].compactMap({ $0.map { ("provider.input", $0) } }) {
            if let role = roles.first(where: { $0.1 == n }) {
                throw GenerationError("\(file): \"\(key)\": '\(n)' is the contract's \(role.0) input, fed per call (a constant table is another input)")
            }
        }
    }

    /// A file path of the contract, taken from the contract file's folder when relative.
    func resolved(_ spec: String) -> String {
        let folder = (file as NSString).deletingLastPathComponent
        return spec.hasPrefix("/") || folder.isEmpty || !FileManager.default.fileExists(atPath: file) ? spec : folder + "/" + spec
    }

    /// The constant-table inputs, and the files the contract binds to some of them.
    func staticInputs() throws -> ([String], [String: String]) {
        var statics = base?.staticInputs ?? []
        var staticFiles: [String: String] = [:]
        if let s = o["static_inputs"] {
            if case let .object(files) = s {
                for (n, v) in files.sorted(by: { $0.key < $1.key }) {
                    guard let spec = v.stringValue else { throw bad("static_inputs.\(n)", "a file (FILE.npy or FILE:dtype:shape)") }
                    staticFiles[try input(n, "static_inputs")] = resolved(spec)
                }
                statics = Array(Set(statics).union(staticFiles.keys)).sorted { a, b in
                    (f.inputs.firstIndex { $0.name == a } ?? 0) < (f.inputs.firstIndex { $0.name == b } ?? 0)
                }
            } else {
                guard let a = s.arrayValue else { throw bad("static_inputs", "a list of input names, or an object of input name to file") }
                statics = try a.map { v in
                    guard let n = v.stringValue else { throw bad("static_inputs", "a list of input names") }
                    return try input(n, "static_inputs")
                }
            }
        }
        return (statics, staticFiles)
    }

    func provider(tokenIDs: String?) throws -> TableRowProvider.Spec? {
        var provider: TableRowProvider.Spec?
        if let p = o["provider"] {
            guard case let .object(po) = p, let name = po["input"]?.stringValue, let table = po["table"]?.stringValue else {
                throw bad("provider", "{\"input\": NAME, \"table\": FILE, \"scale\": FILE, \"rows_by\": \"input_ids\"}")
            }
            let knownKeys: Set<String> = ["input", "table", "scale", "rows_by"]
            if let unknown = po.keys.sorted().first(where: { !knownKeys.contains($0) }) {
                throw GenerationError("\(file): unknown key \"provider.\(unknown)\" (known: \(knownKeys.sorted().joined(separator: ", ")))")
            }
            if let sc = po["scale"], sc.stringValue == nil, sc != .null { throw bad("provider.scale", "a file (FILE.npy or FILE:dtype:shape)") }
            let rowsBy = try po["rows_by"].map { v -> String in
                guard let n = v.stringValue else { throw bad("provider.rows_by", "an input name") }
                return try input(n, "provider.rows_by")
            }
            provider = TableRowProvider.Spec(input: try input(name, "provider.input"), table: resolved(table),
                                             scale: po["scale"]?.stringValue.map(resolved), rowsBy: rowsBy ?? tokenIDs ?? "input_ids")
        }
        return provider
    }

    func functions(tokenIDs: String, context ctx: Int) throws -> GenerationContract.Functions {
        guard let idsType = f.inputs.first(where: { $0.name == tokenIDs })?.type.tensorType else {
            throw GenerationError("\(file): \"token_ids\" '\(tokenIDs)' is not a tensor input")
        }
        let functions: GenerationContract.Functions
        if let pre, let dec {
            let pt = model.program.function(named: pre)!.inputs.first { $0.name == tokenIDs }?.type.tensorType
            functions = .prefillDecode(prefill: pre, prefillWidth: pt.map { GenerationContract.width(of: $0, context: ctx) } ?? .fixed(1), decode: dec)
        } else if fname == nil, let base, case .prefillDecode = base.functions {
            functions = base.functions
        } else {
            functions = .single(f.name, GenerationContract.width(of: idsType, context: ctx))
        }
        return functions
    }
}
