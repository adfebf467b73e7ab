import Interpreter

/// Sampling settings (Hugging Face `generate` semantics).
public struct SamplingOptions {
    /// 0 = greedy (argmax).
    public var temperature: Float = 0
    /// Keep the k most likely tokens (0 = off).
    public var topK: Int = 0
    /// Keep the smallest set whose probability reaches p (1 = off).
    public var topP: Float = 1
    /// > 1 discourages tokens already seen (logit / p if positive, × p if negative).
    public var repetitionPenalty: Float = 1
    public var seed: UInt64 = 0

    public init(temperature: Float = 0, topK: Int = 0, topP: Float = 1, repetitionPenalty: Float = 1, seed: UInt64 = 0) {
        self.temperature = temperature
        self.topK = topK
        self.topP = topP
        self.repetitionPenalty = repetitionPenalty
        self.seed = seed
    }
}

/// Picks the next token from a row of logits.
public struct Sampler {
    public var options: SamplingOptions
    var rng: Xoshiro256

    public init(_ options: SamplingOptions) {
        self.options = options
        rng = Xoshiro256(seed: options.seed)
    }

    /// - Parameters:
    ///   - logits: one row, length vocab.
    ///   - history: tokens seen so far (prompt and generated), for the repetition penalty.
    public mutating func next(_ logits: [Float], history: [Int32]) -> Int32 {
        var l = logits
        if options.repetitionPenalty != 1 {
            for t in Set(history) where Int(t) < l.count && t >= 0 {
                let v = l[Int(t)]
                l[Int(t)] = v > 0 ? v / options.repetitionPenalty : v * options.repetitionPenalty
            }
        }
        if options.temperature <= 0 { return Int32(Sampler.argmax(l)) }
        var candidates = l.indices.map { ($0, l[$0] / options.temperature) }
        candidates.sort { $0.1 > $1.1 }
        if options.topK > 0 && options.topK < candidates.count { candidates.removeLast(candidates.count - options.topK) }
        let maxLogit = candidates[0].1
        var probs = candidates.map { expf($0.1 - maxLogit) }
        let sum = probs.reduce(0, +)
        probs = probs.map { $0 / sum }
        if options.topP < 1 {
            var acc: Float = 0
            var keep = probs.count
            for (i, p) in probs.enumerated() {
                acc += p
                if acc >= options.topP { keep = i + 1; break }
            }
            candidates.removeLast(candidates.count - keep)
            probs.removeLast(probs.count - keep)
            let s = probs.reduce(0, +)
            probs = probs.map { $0 / s }
        }
        let u = Float(rng.next() >> 40) / Float(1 << 24)
        var acc: Float = 0
        for (i, p) in probs.enumerated() {
            acc += p
            if u < acc { return Int32(candidates[i].0) }
        }
        return Int32(candidates.last!.0)
    }

    /// Index of the largest value (the first on ties); NaN never wins.
    public static func argmax(_ a: [Float]) -> Int {
        var best = 0
        var bestValue = -Float.infinity
        for (i, v) in a.enumerated() where v > bestValue {
            best = i
            bestValue = v
        }
        return best
    }
}

/// xoshiro256** seeded through SplitMix64: reproducible sampling for a given `--seed`.
struct Xoshiro256 {
    var s: (UInt64, UInt64, UInt64, UInt64)
    init(seed: UInt64) {
        var g = SplitMix64(seed: seed)
        s = (g.next(), g.next(), g.next(), g.next())
    }
    mutating func next() -> UInt64 {
        let result = ((s.1 &* 5) << 7 | (s.1 &* 5) >> 57) &* 9
        let t = s.1 << 17
        s.2 ^= s.0
        s.3 ^= s.1
        s.1 ^= s.2
        s.0 ^= s.3
        s.2 ^= t
        s.3 = (s.3 << 45) | (s.3 >> 19)
        return result
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
