import GraphIR
import Interpreter

/// The four-input stateful LLM contract of the seed models, read from a function's signature:
/// `input_ids` [1, S] int32, `causal_mask` [1, 1, S, CTX] fp16/fp32 additive (0 attend,
/// −1e4 masked), `position_ids` [1, S] int32, `cache_offset` [1] int32 (first KV slot written),
/// output `logits` [1, S, vocab]; KV caches held in states.
public struct LLMContract {
    /// How many tokens one call may take.
    public enum Width: Equatable {
        /// Any S in `lower...upper` (RangeDim).
        case range(lower: Int, upper: Int)
        /// Only these S (EnumeratedShapes).
        case enumerated([Int])
        /// Exactly S (a fixed graph; S = 1 is single-token only).
        case fixed(Int)
    }

    public let function: String
    public let contextLength: Int
    public let width: Width
    public let maskDType: DType
    public let logitsName: String
    /// Inputs beyond the four (e.g. a per-layer embedding table bound once): must be given.
    public let extraInputs: [Value]

    public static let required = ["input_ids", "causal_mask", "position_ids", "cache_offset"]

    /// - Throws: `InterpreterError.unsupported` naming what is missing or malformed.
    public init(function f: Function) throws {
        function = f.name
        func fail(_ why: String) -> InterpreterError {
            .unsupported("function '\(f.name)' does not follow the stateful LLM contract (input_ids, causal_mask, position_ids, cache_offset → logits): \(why)")
        }
        func input(_ name: String) throws -> TensorType {
            guard let v = f.inputs.first(where: { $0.name == name }) else { throw fail("no input '\(name)'") }
            guard let t = v.type.tensorType else { throw fail("input '\(name)' is \(v.type), expected a tensor") }
            return t
        }
        let ids = try input("input_ids"), mask = try input("causal_mask")
        let pos = try input("position_ids"), off = try input("cache_offset")
        guard ids.rank == 2, ids.dtype.isInteger else { throw fail("input_ids is \(ids), expected an int32 [1, S] tensor") }
        guard pos.rank == 2, pos.dtype.isInteger else { throw fail("position_ids is \(pos), expected an int32 [1, S] tensor") }
        guard off.rank == 1, off.dtype.isInteger else { throw fail("cache_offset is \(off), expected an int32 [1] tensor") }
        guard mask.rank == 4, mask.dtype.isFloat, let ctx = mask.shape[3].fixedValue else {
            throw fail("causal_mask is \(mask), expected [1, 1, S, CTX] with a fixed CTX")
        }
        contextLength = ctx
        maskDType = mask.dtype
        switch ids.shape[1] {
        case let .fixed(n): width = .fixed(n)
        case let .symbol(sym):
            switch sym.constraint {
            case let .range(lo, hi): width = .range(lower: max(lo, 1), upper: min(hi ?? ctx, ctx))
            case let .enumerated(values): width = .enumerated(values.sorted())
            case .unconstrained: width = .range(lower: 1, upper: ctx)
            }
        default: width = .range(lower: 1, upper: ctx)
        }
        guard let logits = f.outputs.first(where: { $0.name == "logits" }) ?? f.outputs.first else { throw fail("no outputs") }
        logitsName = logits.name
        extraInputs = f.inputs.filter { !$0.type.isState && !LLMContract.required.contains($0.name) }
        guard !f.stateInputs.isEmpty else { throw fail("no state inputs (KV caches)") }
    }

    /// Whether a call may take `w` tokens (S = `w`).
    public func accepts(width w: Int) -> Bool {
        switch width {
        case let .range(lo, hi): return w >= lo && w <= hi
        case let .enumerated(sizes): return sizes.contains(w)
        case let .fixed(f): return w == f
        }
    }

    /// The widths a call can use for `n` pending tokens (largest first), and whether the chunk
    /// must be padded to the width.
    public func chunk(for n: Int, limit: Int?) -> (take: Int, width: Int) {
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
}
