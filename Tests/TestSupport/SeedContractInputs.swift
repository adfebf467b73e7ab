import GraphIR
import Interpreter

/// Inputs of the seed's four-input LLM contract (`input_ids` [1,S] int32, `causal_mask`
/// [1,1,S,CTX] additive fp16 with -1e4 for masked slots, `position_ids` [1,S] int32,
/// `cache_offset` [1] int32) for a window of token ids starting at KV slot `offset`, built
/// directly from that definition, so interpreter tests need not trust the generator's builder.
public enum LLMInputs {
    public static func make(ids: [Int32], offset: Int, ctx: Int, maskDType: DType = .fp16) -> [String: Tensor] {
        let w = ids.count
        var mask = [Float](repeating: -1e4, count: w * ctx)
        for r in 0..<w {
            for c in 0...min(offset + r, ctx - 1) { mask[r * ctx + c] = 0 }
        }
        return [
            "input_ids": Tensor(.int32, shape: [1, w], ints: ids),
            "causal_mask": Tensor(maskDType, shape: [1, 1, w, ctx], floats: mask),
            "position_ids": Tensor(.int32, shape: [1, w], ints: (0..<w).map { Int32(offset + $0) }),
            "cache_offset": Tensor(.int32, shape: [1], ints: [Int32(offset)]),
        ]
    }

    /// The four contract inputs of call `k` recorded in a `tools/` reference file
    /// (`call{k}_input_ids`, `…_causal_mask`, `…_position_ids`, `…_cache_offset`; torch's run).
    public static func recorded(_ ref: [String: Tensor], call k: Int) throws -> [String: Tensor] {
        var inputs: [String: Tensor] = [:]
        for input in ["input_ids", "causal_mask", "position_ids", "cache_offset"] {
            guard let t = ref["call\(k)_\(input)"] else {
                struct Missing: Error, CustomStringConvertible { let description: String }
                throw Missing(description: "reference has no call\(k)_\(input)")
            }
            inputs[input] = t
        }
        return inputs
    }
}
