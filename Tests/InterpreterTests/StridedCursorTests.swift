import Interpreter
import XCTest

/// `StridedCursor` against the definition: after i steps, each offset is Σ index[d]·stride[d]
/// of the row-major multi-index of i (computed here by division, not incrementally).
final class StridedCursorTests: XCTestCase {
    func testOffsetsFollowTheRowMajorIndex() {
        let shape = [3, 1, 4, 2]
        let a = [8, 100, 2, 1], b = [0, 7, -3, 5], c = [1, 0, 0, 24]
        var cursor = StridedCursor(shape: shape, a: a, b: b, c: c, start: (10, 20, 30))
        let n = shape.reduce(1, *)
        for i in 0...n {  // one more than n: the cursor wraps to index 0
            var rem = i % n, ea = 10, eb = 20, ec = 30
            for d in (0..<shape.count).reversed() {
                let k = rem % shape[d]
                rem /= shape[d]
                ea += k * a[d]; eb += k * b[d]; ec += k * c[d]
            }
            XCTAssertEqual([cursor.offsetA, cursor.offsetB, cursor.offsetC], [ea, eb, ec], "step \(i)")
            cursor.step()
        }
    }

    func testRankZeroNeverMoves() {
        var cursor = StridedCursor(shape: [], a: [], start: (5, 0, 0))
        cursor.step()
        XCTAssertEqual(cursor.offsetA, 5)
    }
}
