import Foundation
import Interpreter

/// How close a candidate tensor is to a reference tensor of the same shape (all sums in
/// float64; ints and bools compared as numbers).
///
/// - `maxAbs` = max |c − r| over elements finite on both sides (∞ when one side is NaN/±inf
///   where the other is not);
/// - `maxRel` = max |c − r| / |r| over elements with r ≠ 0 (Polygraphy's relative error);
/// - `cosine` = Σ c·r / (‖c‖ ‖r‖) (1 when both are all zeros);
/// - `snrDB` = 10 log10(Σ r² / Σ (c − r)²), `psnrDB` = 10 log10(max r² / mean (c − r)²)
///   (∞ when the tensors are equal);
/// - `top1Agreement`: the share of rows along the last axis whose argmax is the same (for
///   logits-like tensors: rank ≥ 2, last dimension ≥ 2), else nil;
/// - NaN and ±inf counts per side.
///
/// A tensor passes (``passes(_:)``) when every element satisfies |c − r| ≤ atol + rtol·|r|
/// (`numpy.allclose(c, r, rtol, atol)`), NaN/inf agree position by position, and the SNR is at
/// least `minSNR` dB when one is given.
public struct ErrorMetrics: Equatable {
    public var count = 0
    public var maxAbs = 0.0
    public var maxRel = 0.0
    public var cosine = 1.0
    public var snrDB = Double.infinity
    public var psnrDB = Double.infinity
    public var top1Agreement: Double?
    public var referenceNaN = 0, referenceInf = 0
    public var candidateNaN = 0, candidateInf = 0
    /// Elements where NaN/inf differ between the sides.
    public var nonFiniteMismatches = 0
    /// Elements outside atol + rtol·|r| (filled by ``init(candidate:reference:tolerance:)``).
    public var violations = 0
    /// Largest |c − r| − rtol·|r|: how far past atol the worst element is (diagnostic).
    public var worstExcess = -Double.infinity

    public init() {}

    /// - Returns: nil when the shapes differ or a side holds strings.
    public init?(candidate c: Tensor, reference r: Tensor, tolerance: Tolerance) {
        guard c.shape == r.shape else { return nil }
        if case .string = c.data { return nil }
        if case .string = r.data { return nil }
        let a = c.floats, b = r.floats
        count = a.count
        var sumRR = 0.0, sumCC = 0.0, sumCR = 0.0, sumEE = 0.0, peak = 0.0
        for i in 0..<a.count {
            let x = Double(a[i]), y = Double(b[i])
            if x.isNaN { candidateNaN += 1 } else if x.isInfinite { candidateInf += 1 }
            if y.isNaN { referenceNaN += 1 } else if y.isInfinite { referenceInf += 1 }
            guard x.isFinite, y.isFinite else {
                let same = (x.isNaN && y.isNaN) || (x.isInfinite && x == y)
                if !same { nonFiniteMismatches += 1; violations += 1 }
                continue
            }
            let e = Swift.abs(x - y), ay = Swift.abs(y)
            if e > maxAbs { maxAbs = e }
            if ay > 0, e / ay > maxRel { maxRel = e / ay }
            if !(e <= tolerance.atol + tolerance.rtol * ay) { violations += 1 }
            worstExcess = Swift.max(worstExcess, e - tolerance.rtol * ay)
            sumRR += y * y; sumCC += x * x; sumCR += x * y; sumEE += e * e
            peak = Swift.max(peak, ay)
        }
        if nonFiniteMismatches > 0 { maxAbs = .infinity }
        let finite = count - Swift.max(candidateNaN + candidateInf, referenceNaN + referenceInf)
        if sumCC == 0 && sumRR == 0 { cosine = 1 } else if sumCC == 0 || sumRR == 0 { cosine = 0 } else { cosine = sumCR / (sumCC.squareRoot() * sumRR.squareRoot()) }
        if sumEE > 0 {
            snrDB = sumRR > 0 ? 10 * log10(sumRR / sumEE) : -Double.infinity
            let mse = sumEE / Double(Swift.max(finite, 1))
            psnrDB = peak > 0 ? 10 * log10(peak * peak / mse) : -Double.infinity
        }
        if nonFiniteMismatches > 0 { snrDB = -.infinity; psnrDB = -.infinity }
        if r.rank >= 2, let k = r.shape.last, k >= 2 {
            let rows = count / k
            var same = 0
            for row in 0..<rows {
                if ErrorMetrics.argmax(a, row * k, k) == ErrorMetrics.argmax(b, row * k, k) { same += 1 }
            }
            top1Agreement = rows > 0 ? Double(same) / Double(rows) : nil
        }
    }

    static func argmax(_ a: [Float], _ start: Int, _ n: Int) -> Int {
        var best = start
        for i in start..<(start + n) where a[i] > a[best] || (a[best].isNaN && !a[i].isNaN) { best = i }
        return best - start
    }

    /// Whether the candidate is within `tolerance` (see the type's documentation).
    public func passes(_ tolerance: Tolerance) -> Bool {
        if violations > 0 || nonFiniteMismatches > 0 { return false }
        if let m = tolerance.minSNR, snrDB < m { return false }
        return true
    }
}

/// `--atol`, `--rtol`, `--min-snr`.
public struct Tolerance: Equatable {
    public var atol: Double
    public var rtol: Double
    /// Minimum SNR in dB, or nil.
    public var minSNR: Double?
    public init(atol: Double = 1e-3, rtol: Double = 1e-3, minSNR: Double? = nil) {
        self.atol = atol
        self.rtol = rtol
        self.minSNR = minSNR
    }
}

/// Summary statistics of one tensor (for the inputs of the first diverging op).
public struct TensorStats: Equatable {
    public var shape: [Int]
    public var dtype: String
    public var min = Double.infinity, max = -Double.infinity, mean = 0.0, maxAbs = 0.0
    public var nan = 0, inf = 0

    public init(_ t: Tensor) {
        shape = t.shape
        dtype = t.dtype.rawValue
        var sum = 0.0, n = 0
        for f in t.floats {
            let x = Double(f)
            if x.isNaN { nan += 1; continue }
            if x.isInfinite { inf += 1; continue }
            min = Swift.min(min, x); max = Swift.max(max, x); maxAbs = Swift.max(maxAbs, Swift.abs(x))
            sum += x; n += 1
        }
        mean = n > 0 ? sum / Double(n) : 0
        if n == 0 { min = 0; max = 0 }
    }
}
