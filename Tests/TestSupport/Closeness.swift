import XCTest

/// Element-wise closeness as numpy's `allclose` judges it, reported at the first bad element:
/// `|got - want| <= atol + rtol * |want|`, NaN equal to NaN, infinities equal only to themselves.
public func assertClose(_ got: [Float], _ want: [Float], atol: Float = 0, rtol: Float = 0, _ what: String,
                        file: StaticString = #filePath, line: UInt = #line) {
    guard got.count == want.count else {
        return XCTFail("\(what): \(got.count) values, expected \(want.count)", file: file, line: line)
    }
    for i in 0..<got.count {
        let g = got[i], w = want[i]
        if g.isNaN && w.isNaN { continue }
        if g.isInfinite || w.isInfinite { if g == w { continue } }
        else if abs(g - w) <= atol + rtol * abs(w) { continue }
        return XCTFail("\(what): element \(i) is \(g), expected \(w)", file: file, line: line)
    }
}
