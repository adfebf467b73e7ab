import GraphIR
import Interpreter

/// How a package's LLM is driven one call at a time: the role of each input, output and state
/// of its function(s). Detected from the signature and the graph (``detect(model:function:)``)
/// for the public recipes — the seed's four inputs; Apple's "On Device Llama 3.1 with Core ML"
/// (`inputIds`, `causalMask` [1, 1, S, END], stacked `keyCache` / `valueCache` states, write at
/// `END − S`); coremltools' prefill/decode multifunction pair; caches as explicit inputs and
/// outputs (pre-iOS 18) — or read from a JSON file (``init(json:model:)``, schema in README
/// "Generation contracts").
///
/// One call writes `w` tokens at KV slots `p … p+w−1` (`p` = tokens already cached) and
/// returns logits [1, w, vocab] (or one row when the graph allows row selection).
public struct GenerationContract: Equatable {
    /// How many tokens one call may take.
    public enum Width: Equatable, CustomStringConvertible {
        /// Any S in `lower...upper` (RangeDim).
        case range(lower: Int, upper: Int)
        /// Only these S (EnumeratedShapes).
        case enumerated([Int])
        /// Exactly S (a fixed graph; S = 1 is single-token only).
        case fixed(Int)

        public func admits(_ w: Int) -> Bool {
            switch self {
            case let .range(lo, hi): return w >= lo && w <= hi
            case let .enumerated(sizes): return sizes.contains(w)
            case let .fixed(f): return w == f
            }
        }

        public var widest: Int {
            switch self {
            case let .range(_, hi): return hi
            case let .enumerated(sizes): return sizes.max() ?? 1
            case let .fixed(w): return w
            }
        }

        public var description: String {
            switch self {
            case let .range(lo, hi): return "S in \(lo)...\(hi)"
            case let .enumerated(s): return "S in {\(s.map(String.init).joined(separator: ", "))}"
            case let .fixed(w): return "S = \(w)"
            }
        }
    }

    /// Where the positions of the call's tokens come from.
    public enum Positions: Equatable {
        /// An int [1, S] input: `p + r` for row r.
        case input(String)
        /// No input: the graph derives them from the write offset input.
        case fromWriteOffset
        /// No input: the graph derives them from the mask's last dimension (`END − S + r`).
        case fromMaskEnd
    }

    /// The attention mask input.
    public struct Mask: Equatable {
        public enum Window: Equatable {
            /// [1, 1, S, CTX]: every call covers the whole cache window.
            case fixed
            /// [1, 1, S, END], END = p + S (Apple's recipe): the last dimension grows.
            case growing
            /// [1, S] (Hugging Face's `attention_mask`, as `exporters` converts it): 1 = a real
            /// token, 0 = padding; the graph builds the causal part itself.
            case padding
            /// The contract file's word for it.
            public var name: String {
                switch self {
                case .fixed: return "fixed"
                case .growing: return "growing"
                case .padding: return "padding"
                }
            }
        }
        public var name: String
        /// fp16 / fp32 (additive: 0 attend, `maskedValue` masked) or bool (true attend); a
        /// `padding` mask may also be int (1 attend, 0 padding).
        public var dtype: DType
        public var window: Window
        /// The additive value of a masked column: −inf (as Apple's code writes it) or −1e4.
        public var maskedValue: Float
        public var isBoolean: Bool { dtype == .bool }
        public init(name: String, dtype: DType, window: Window, maskedValue: Float) {
            self.name = name
            self.dtype = dtype
            self.window = window
            self.maskedValue = maskedValue
        }
    }

    /// Where the first KV slot a call writes comes from.
    public enum WriteOffset: Equatable {
        /// An int [1] input (`cache_offset`, `current_pos`, …).
        case input(String)
        /// `causalMask.shape[-1] − S` (Apple's recipe).
        case fromMaskShape
        /// Held in a state the graph advances itself (nothing to pass).
        case state(String)
        /// Nothing is written: the model has no KV cache (``KVLayout/none``).
        case none
    }

    /// Where the KV cache lives.
    public enum KVLayout: Equatable {
        /// One state per layer and K / V, [1, H, CTX, D].
        case perLayerStates([String])
        /// One stacked state per K and V, [L, 1, H, CTX, D].
        case stackedStates([String])
        /// Plain inputs whose updated value is an output (no states): (input, output) pairs.
        case explicit([Pair])
        /// No KV cache: every call takes the whole sequence from position 0 and recomputes it
        /// (Hugging Face `exporters`' causal-lm feature without past, stateless conversions).
        /// Decoding token t costs a call of width t; the context is the token input's widest S.
        case none

        public struct Pair: Equatable {
            public var input: String
            public var output: String
            public init(input: String, output: String) { self.input = input; self.output = output }
        }
    }

    /// The function(s) to call.
    public enum Functions: Equatable {
        /// One function for prefill and decode.
        case single(String, Width)
        /// A static-S `prefill` and an S = 1 `decode` function sharing states.
        case prefillDecode(prefill: String, prefillWidth: Width, decode: String)

        public var names: [String] {
            switch self {
            case let .single(f, _): return [f]
            case let .prefillDecode(p, _, d): return [p, d]
            }
        }
    }

    public var tokenIDs: String
    public var positions: Positions
    public var mask: Mask?
    public var writeOffset: WriteOffset
    public var kv: KVLayout
    public var functions: Functions
    public var logits: String
    public var contextLength: Int
    /// Inputs that are constant tables (e.g. a per-layer embedding table `ple_table` and its
    /// `ple_scale`), bound once for the generator's life (``Generator/bind(_:to:)``, the CLI's
    /// `--static-input`), never copied per call.
    public var staticInputs: [String]
    /// Files for static inputs the contract file names (`"static_inputs": {"ple_table":
    /// "ple_table.npy"}`): `FILE.npy` or `FILE:dtype:shape` (``MappedArray``), paths resolved
    /// against the contract file's folder.
    public var staticInputFiles: [String: String] = [:]
    /// A per-token input filled from a mapped table (provider mode, ``TableRowProvider``).
    public var provider: TableRowProvider.Spec?
    /// What the contract was read from: "detected" or "file <path>".
    public var source: String

    /// The inputs the generator fills on every call, with their role (`token_ids`,
    /// `positions`, `mask`, `write_offset`, `kv`): never a constant table.
    public var perCallInputs: [(role: String, input: String)] {
        var out: [(String, String)] = [("token_ids", tokenIDs)]
        if case let .input(n) = positions { out.append(("positions", n)) }
        if let mask { out.append(("mask", mask.name)) }
        if case let .input(n) = writeOffset { out.append(("write_offset", n)) }
        if case let .explicit(pairs) = kv { out += pairs.map { ("kv", $0.input) } }
        return out
    }

    public init(tokenIDs: String, positions: Positions, mask: Mask?, writeOffset: WriteOffset, kv: KVLayout,
                functions: Functions, logits: String, contextLength: Int, staticInputs: [String] = [], source: String = "given") {
        self.tokenIDs = tokenIDs
        self.positions = positions
        self.mask = mask
        self.writeOffset = writeOffset
        self.kv = kv
        self.functions = functions
        self.logits = logits
        self.contextLength = contextLength
        self.staticInputs = staticInputs
        self.source = source
    }

    /// The function that decodes one token.
    public var decodeFunction: String {
        switch functions {
        case let .single(f, _): return f
        case let .prefillDecode(_, _, d): return d
        }
    }

    /// The function (and its widths) that prefills.
    public var prefill: (function: String, width: Width) {
        switch functions {
        case let .single(f, w): return (f, w)
        case let .prefillDecode(p, w, _): return (p, w)
        }
    }
}

// MARK: - Calls

extension GenerationContract {
    /// The inputs of one call of `function` writing `ids` at KV slots `position…` (no padding:
    /// the call's width is `ids.count`): token ids, positions `position + r`, the write offset,
    /// the mask (row r attends to columns ≤ position + r), and `caches` for explicit KV inputs
    /// (zeros of the input's type when absent). `types` are the function's input types.
    /// `real` is how many of `ids` are real tokens (the rest padding): a `padding` mask marks
    /// the rest 0. Inputs named in `omitting` (explicit caches the plan carries itself) are not
    /// made.
    /// - Throws: `GenerationError` when an explicit cache input has no static shape.
    public func inputs(ids: [Int32], position: Int, function f: Function, caches: [String: Tensor] = [:],
                       real: Int? = nil, omitting: Set<String> = []) throws -> [String: Tensor] {
        let w = ids.count
        var out: [String: Tensor] = [tokenIDs: Tensor(.int32, shape: [1, w], ints: ids)]
        func intType(_ name: String) -> DType {
            f.inputs.first { $0.name == name }?.type.tensorType?.dtype ?? .int32
        }
        if case let .input(name) = positions {
            out[name] = Tensor(intType(name), shape: [1, w], ints: (0..<w).map { Int32(position + $0) })
        }
        if case let .input(name) = writeOffset {
            let rank = f.inputs.first { $0.name == name }?.type.tensorType?.rank ?? 1
            out[name] = Tensor(intType(name), shape: [Int](repeating: 1, count: max(rank, 1)), ints: [Int32(position)])
        }
        if let m = mask, m.window == .padding {
            let n = min(real ?? w, w)
            let ones = (0..<w).map { $0 < n }
            if m.isBoolean {
                out[m.name] = Tensor(shape: [1, w], bools: ones)
            } else if m.dtype.isInteger {
                out[m.name] = Tensor(m.dtype, shape: [1, w], ints: ones.map { $0 ? 1 : 0 })
            } else {
                out[m.name] = Tensor(m.dtype, shape: [1, w], floats: ones.map { $0 ? 1 : 0 })
            }
        } else if let m = mask {
            let cols = m.window == .growing ? position + w : contextLength
            if m.isBoolean {
                var b = [Bool](repeating: false, count: w * cols)
                for r in 0..<w { for c in 0...min(position + r, cols - 1) { b[r * cols + c] = true } }
                out[m.name] = Tensor(shape: [1, 1, w, cols], bools: b)
            } else {
                var v = [Float](repeating: m.maskedValue, count: w * cols)
                for r in 0..<w { for c in 0...min(position + r, cols - 1) { v[r * cols + c] = 0 } }
                out[m.name] = Tensor(m.dtype, shape: [1, 1, w, cols], floats: v)
            }
        }
        if case let .explicit(pairs) = kv {
            for p in pairs where !omitting.contains(p.input) {
                if let t = caches[p.input] { out[p.input] = t; continue }
                guard let t = f.inputs.first(where: { $0.name == p.input })?.type.tensorType,
                      let shape = t.shape.map(\.fixedValue) as [Int?]?, !shape.contains(nil), let n = t.elementCount else {
                    throw GenerationError("cache input '\(p.input)' of function '\(f.name)' has no static shape")
                }
                out[p.input] = Tensor(t.dtype, shape: shape.map { $0! }, floats: [Float](repeating: 0, count: n))
            }
        }
        return out
    }

    /// The width of the function's token-id input.
    public static func width(of t: TensorType, context ctx: Int) -> Width {
        guard t.rank >= 2 else { return .fixed(1) }
        switch t.shape[1] {
        case let .fixed(n): return .fixed(n)
        case let .symbol(sym):
            switch sym.constraint {
            case let .range(lo, hi): return .range(lower: max(lo, 1), upper: min(hi ?? ctx, ctx))
            case let .enumerated(values): return .enumerated(values.sorted())
            case .unconstrained: return .range(lower: 1, upper: ctx)
            }
        default: return .range(lower: 1, upper: ctx)
        }
    }

    /// The widths a call can use for `n` pending tokens: how many to take and the (padded)
    /// width of the call. `limit` caps the width (a `--prefill-chunk`).
    public static func chunk(_ width: Width, for n: Int, limit: Int?) -> (take: Int, width: Int) {
        switch width {
        case let .range(lo, hi):
            let cap = min(hi, limit ?? hi)
            let take = min(n, max(cap, 1))
            return (take, max(take, lo))
        case let .enumerated(sizes):
            let allowed = sizes.filter { limit == nil || $0 <= limit! }
            let candidates = allowed.isEmpty ? sizes : allowed
            if let exact = candidates.last(where: { $0 <= n }) { return (exact, exact) }
            let w = candidates.first { $0 >= n } ?? candidates.last!
            return (min(n, w), w)
        case let .fixed(w):
            return (min(n, w), w)
        }
    }

    /// The vocabulary size: the last dimension of the logits output, when fixed.
    public func vocabularySize(in model: Model) -> Int? {
        guard let f = model.program.function(named: decodeFunction),
              let t = f.outputs.first(where: { $0.name == logits })?.type.tensorType else { return nil }
        return t.shape.last?.fixedValue
    }

    /// KV bytes the graph reads per decoded token at `live` cached positions: every KV state
    /// (or explicit cache) scaled by live / CTX (the fused attention reads unmasked columns only).
    public func liveKVBytes(in model: Model, live: Int) -> Int {
        guard let f = model.program.function(named: decodeFunction) else { return 0 }
        var total = 0
        for v in f.inputs {
            let isKV: Bool
            switch kv {
            case let .perLayerStates(n), let .stackedStates(n): isKV = n.contains(v.name)
            case let .explicit(p): isKV = p.contains { $0.input == v.name }
            case .none: isKV = false
            }
            guard isKV, let t = v.type.stateWrappedTensor ?? v.type.tensorType, let n = t.elementCount else { continue }
            total += t.dtype.byteCount(elements: n) / max(contextLength, 1) * min(live, contextLength)
        }
        return total
    }
}
