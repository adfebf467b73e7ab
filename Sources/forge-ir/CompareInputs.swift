import Foundation
import GraphIR
import Interpreter
import Generation

/// The calls `forge-ir compare` makes: from `--inputs`, from the reference's recorded inputs,
/// a generated prefill (+ decode calls) for LLM packages with a KV cache (Generation's `GenerationContract`: states carried by
/// the sessions, explicit caches by ``ValueComparator/compare`` through ``carry(_:)``; packages without a KV cache or with
/// static inputs get random arrays, which `CompareCommand.checkLLMOptions` notes),
/// or random arrays generated from the function's input types.
enum CompareInputs {
    typealias Call = (inputs: [String: Tensor], label: String)

    /// Uniform in [-1, 1) from 24 bits of the stream.
    static func unit(_ g: inout SplitMix64) -> Float { Float(g.next() >> 40) / Float(1 << 23) - 1 }

    /// LLM contract: a prefill of `length` random ids (seed) and `decodeSteps` single-token
    /// calls (explicit caches zero in the first call; ``carry(_:)`` feeds the next ones); otherwise one call of random arrays per input (repeated `decodeSteps` more times
    /// with states carried): floats uniform in [-1, 1), integers in 0..<8, bools fair; a
    /// flexible dimension takes its RangeDim lower bound (at least 1) or its first enumerated size.
    static func generated(_ f: Function, seed: UInt64, length: Int, decodeSteps: Int) throws -> [Call] {
        if let c = try? GenerationContract.detect(function: f), c.staticInputs.isEmpty, c.kv != .none {
            let vocab = f.outputs.first { $0.name == c.logits }?.type.tensorType?.shape.last?.fixedValue ?? 32000
            var n = min(length, c.contextLength - decodeSteps)
            let width = c.prefill.width
            switch width {
            case let .range(lo, hi): n = min(max(n, lo), hi)
            case let .enumerated(sizes): n = sizes.filter { $0 <= n }.max() ?? sizes.min() ?? 1
            case let .fixed(w): n = w
            }
            guard n >= 1, n + decodeSteps <= c.contextLength else {
                throw CompareCLIError("a prefill of \(n) tokens and \(decodeSteps) decode steps do not fit the context of \(c.contextLength)")
            }
            guard decodeSteps == 0 || width.admits(1) else {
                throw CompareCLIError("--decode-steps: function '\(f.name)' takes no single-token calls (\(c.tokenIDs) \(width))")
            }
            var g = SplitMix64(seed: seed)   // the same ids as diagnose's generated prompts
            let ids = (0..<(n + decodeSteps)).map { _ in Int32(g.next() % UInt64(max(vocab, 1))) }
            var calls: [Call] = [(try c.inputs(ids: Array(ids[0..<n]), position: 0, function: f), "prefill of \(n) random token ids (seed \(seed))")]
            for s in 0..<decodeSteps {
                calls.append((try c.inputs(ids: [ids[n + s]], position: n + s, function: f), "decode step \(s + 1) (token \(ids[n + s]) at position \(n + s))"))
            }
            return calls
        }
        var rng = SplitMix64(seed: seed)
        var inputs: [String: Tensor] = [:]
        for v in f.inputs where !v.type.isState {
            guard let t = v.type.tensorType else { throw CompareCLIError("input '\(v.name)' is \(v.type); give --inputs") }
            let shape: [Int] = try t.shape.map { d in
                switch d {
                case let .fixed(n): return n
                case let .symbol(s):
                    switch s.constraint {
                    case let .range(lo, _): return max(lo, 1)
                    case let .enumerated(values): return values.first ?? 1
                    case .unconstrained: return 1
                    }
                default: throw CompareCLIError("input '\(v.name)' has an unknown dimension; give --inputs")
                }
            }
            let n = shape.reduce(1, *)
            if t.dtype.isFloat {
                inputs[v.name] = Tensor(t.dtype, shape: shape, floats: (0..<n).map { _ in unit(&rng) })
            } else if t.dtype == .bool {
                inputs[v.name] = Tensor(shape: shape, bools: (0..<n).map { _ in rng.next() & 1 == 1 })
            } else {
                inputs[v.name] = Tensor(t.dtype, shape: shape, ints: (0..<n).map { _ in Int32(rng.next() % 8) })
            }
        }
        let label = "random inputs (seed \(seed))"
        return [(inputs, label)] + (0..<decodeSteps).map { (inputs, "\(label), call \($0 + 2)") }
    }

    /// The explicit KV caches of `f`'s contract as output → input (each call's cache outputs are
    /// the next call's cache inputs, as the Generator feeds them), for the calls of
    /// ``generated(_:seed:length:decodeSteps:)``; empty for other functions.
    static func carry(_ f: Function) -> [String: String] {
        guard let c = try? GenerationContract.detect(function: f), c.staticInputs.isEmpty, case let .explicit(pairs) = c.kv else { return [:] }
        return Dictionary(pairs.map { ($0.output, $0.input) }, uniquingKeysWith: { a, _ in a })
    }

    /// Splits recorded arrays into calls: keys `call<K>_<name>` (the tools' reference runs)
    /// give one call per K (unnumbered keys next to them are left out), other keys one call. Function inputs become the call's inputs,
    /// everything else reference values (renamed with `map`: reference name → value name).
    static func recorded(_ arrays: [String: Tensor], function f: Function, map: [String: String])
        -> (calls: [[String: Tensor]], values: [[String: Tensor]], unmatched: [String]) {
        var byCall: [Int: [String: Tensor]] = [:]
        for (key, t) in arrays {
            if key.hasPrefix("call"), let us = key.firstIndex(of: "_"), let k = Int(key[key.index(key.startIndex, offsetBy: 4)..<us]) {
                byCall[k, default: [:]][String(key[key.index(after: us)...])] = t
            } else {
                byCall[-1, default: [:]][key] = t
            }
        }
        let inputNames = Set(f.inputs.filter { !$0.type.isState }.map(\.name))
        var known = Set(f.outputs.map(\.name))
        f.body.walk { op in for v in op.outputs { known.insert(v.name) } }
        var calls: [[String: Tensor]] = [], values: [[String: Tensor]] = [], unmatched = Set<String>()
        // With numbered calls, unnumbered arrays (e.g. final states) belong to no call.
        if byCall.keys.contains(where: { $0 >= 0 }), let extra = byCall.removeValue(forKey: -1) {
            for (name, _) in extra { unmatched.insert(name) }
        }
        let keys = byCall.keys.sorted()
        for k in keys {
            var ins: [String: Tensor] = [:], vals: [String: Tensor] = [:]
            for (name, t) in byCall[k]! {
                let mapped = map[name] ?? name
                if inputNames.contains(mapped) { ins[mapped] = t } else if known.contains(mapped) { vals[mapped] = t } else { unmatched.insert(name) }
            }
            calls.append(ins)
            values.append(vals)
        }
        return (calls, values, unmatched.sorted())
    }
}

struct CompareCLIError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}
