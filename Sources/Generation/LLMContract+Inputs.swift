import GraphIR
import Interpreter

extension LLMContract {
    /// The four contract inputs of one call that writes `ids` at KV slots `position…`, built as
    /// ``Generator`` builds them: `causal_mask` row r is 0 for columns ≤ position + r and −1e4
    /// after, `position_ids` = position + r, `cache_offset` = [position]. No padding: the call's
    /// width is `ids.count`.
    public func inputs(ids: [Int32], position: Int) -> [String: Tensor] {
        let w = ids.count, ctx = contextLength
        var mask = [Float](repeating: -1e4, count: w * ctx)
        for r in 0..<w {
            for c in 0...min(position + r, ctx - 1) { mask[r * ctx + c] = 0 }
        }
        return [
            "input_ids": Tensor(.int32, shape: [1, w], ints: ids),
            "causal_mask": Tensor(maskDType, shape: [1, 1, w, ctx], floats: mask),
            "position_ids": Tensor(.int32, shape: [1, w], ints: (0..<w).map { Int32(position + $0) }),
            "cache_offset": Tensor(.int32, shape: [1], ints: [Int32(position)]),
        ]
    }

    /// Whether one call may take exactly `n` tokens.
    public func admits(width n: Int) -> Bool {
        switch width {
        case let .range(lo, hi): return n >= lo && n <= hi
        case let .enumerated(sizes): return sizes.contains(n)
        case let .fixed(w): return n == w
        }
    }

    /// The vocabulary size: the last dimension of the logits output, when fixed.
    public func vocabularySize(in f: Function) -> Int? {
        guard let logits = f.outputs.first(where: { $0.name == logitsName }), let t = logits.type.tensorType,
              let last = t.shape.last else { return nil }
        return last.fixedValue
    }
}
