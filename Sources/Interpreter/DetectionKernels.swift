import Foundation
import GraphIR

/// MIL `non_maximum_suppression` (iOS15 `tensor_operation`). Source: the MIL op reference and
/// the reference implementation in coremltools' op tests (TensorFlow's
/// `tf.image.non_max_suppression` per batch, Core ML's padding).
///
/// `boxes` [n, B, 4] as (center x, center y, width, height), `scores` [n, B, K]. Each box's score
/// is its best class score; boxes scoring ≤ `score_threshold` are dropped, the rest taken
/// greedily by descending score (ties: lower index first), each removing the later boxes whose
/// IoU with it is > `iou_threshold` — within its own class (the arg-max class) when
/// `per_class_suppression`, the per-class selections then merged in score order. At most
/// `max_boxes` are kept; when none survives, the best-scoring box is returned alone.
/// Outputs: boxes [n, max_boxes, 4] and scores [n, max_boxes, K] (zeros past the count),
/// indices [n, max_boxes] int32 (−1 past the count), count [n] int32.
enum DetectionKernels {
    static let table: [String: Kernel] = ["non_maximum_suppression": nonMaximumSuppression]

    static func iou(_ a: [Double], _ b: [Double]) -> Double {
        func corners(_ v: [Double]) -> (Double, Double, Double, Double) {
            (v[1] - v[3] / 2, v[0] - v[2] / 2, v[1] + v[3] / 2, v[0] + v[2] / 2)   // y1, x1, y2, x2
        }
        let (ay1, ax1, ay2, ax2) = corners(a), (by1, bx1, by2, bx2) = corners(b)
        let areaA = (ay2 - ay1) * (ax2 - ax1), areaB = (by2 - by1) * (bx2 - bx1)
        guard areaA > 0, areaB > 0 else { return 0 }
        let ih = Swift.max(0, Swift.min(ay2, by2) - Swift.max(ay1, by1)), iw = Swift.max(0, Swift.min(ax2, bx2) - Swift.max(ax1, bx1))
        let inter = ih * iw
        return inter / (areaA + areaB - inter)
    }

    /// Greedy selection among `candidates` (box indices), best score first.
    static func greedy(_ candidates: [Int], boxes: [[Double]], score: [Double], iouThreshold: Double, scoreThreshold: Double, limit: Int) -> [Int] {
        let order = candidates.filter { score[$0] > scoreThreshold }.sorted { score[$0] != score[$1] ? score[$0] > score[$1] : $0 < $1 }
        var kept: [Int] = []
        for i in order {
            if kept.count >= limit { break }
            if kept.allSatisfy({ iou(boxes[$0], boxes[i]) <= iouThreshold }) { kept.append(i) }
        }
        return kept
    }

    static func nonMaximumSuppression(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let boxes = try inv.tensor("boxes"), scores = try inv.tensor("scores")
        guard boxes.rank == 3, boxes.shape[2] == 4, scores.rank == 3, scores.shape[0] == boxes.shape[0], scores.shape[1] == boxes.shape[1] else {
            throw KernelError("non_maximum_suppression: boxes must be [n, B, 4] and scores [n, B, K], have \(boxes.shape), \(scores.shape)")
        }
        let (n, nb, k) = (scores.shape[0], scores.shape[1], scores.shape[2])
        let maxBoxes = try inv.int("max_boxes")
        guard maxBoxes >= 0, maxBoxes <= 1 << 20 else { throw KernelError("non_maximum_suppression: max_boxes \(maxBoxes) out of range") }
        let iouT = Double(try inv.float("iou_threshold")), scoreT = Double(try inv.float("score_threshold"))
        let perClass = try inv.bool("per_class_suppression", default: false)
        let bv = boxes.floats.map(Double.init), sv = scores.floats.map(Double.init)
        var outBoxes = [Float](repeating: 0, count: n * maxBoxes * 4), outScores = [Float](repeating: 0, count: n * maxBoxes * k)
        var outIdx = [Int32](repeating: -1, count: n * maxBoxes), outCount = [Int32](repeating: 0, count: n)
        for b in 0..<n {
            let bx = (0..<nb).map { Array(bv[((b * nb + $0) * 4)..<((b * nb + $0) * 4 + 4)]) }
            var best = [Double](repeating: -.infinity, count: nb), cls = [Int](repeating: 0, count: nb)
            for i in 0..<nb {
                for c in 0..<k where sv[(b * nb + i) * k + c] > best[i] {
                    best[i] = sv[(b * nb + i) * k + c]
                    cls[i] = c
                }
            }
            var ids: [Int]
            if perClass {
                ids = []
                for c in Set(cls).sorted() {
                    ids += greedy((0..<nb).filter { cls[$0] == c }, boxes: bx, score: best, iouThreshold: iouT, scoreThreshold: scoreT, limit: maxBoxes)
                }
                ids.sort { best[$0] != best[$1] ? best[$0] > best[$1] : $0 < $1 }
            } else {
                ids = greedy(Array(0..<nb), boxes: bx, score: best, iouThreshold: iouT, scoreThreshold: scoreT, limit: maxBoxes)
            }
            if ids.isEmpty, nb > 0, maxBoxes > 0 {
                ids = [(0..<nb).max { best[$0] != best[$1] ? best[$0] < best[$1] : $0 > $1 }!]
            }
            ids = Array(ids.prefix(maxBoxes))
            for (j, i) in ids.enumerated() {
                for q in 0..<4 { outBoxes[(b * maxBoxes + j) * 4 + q] = Float(bx[i][q]) }
                for c in 0..<k { outScores[(b * maxBoxes + j) * k + c] = Float(sv[(b * nb + i) * k + c]) }
                outIdx[b * maxBoxes + j] = Int32(i)
            }
            outCount[b] = Int32(ids.count)
        }
        return [EW.floatResult(inv.outputDType(0), [n, maxBoxes, 4], outBoxes),
                EW.floatResult(inv.outputDType(1), [n, maxBoxes, k], outScores),
                .tensor(Tensor(.int32, shape: [n, maxBoxes], ints: outIdx)),
                .tensor(Tensor(.int32, shape: [n], ints: outCount))]
    }
}
