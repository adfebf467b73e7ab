import TestSupport
import XCTest
@testable import GraphIR
final class DTypeTests: XCTestCase {
    func testHalfRoundTrip() {
        XCTAssertEqual(Half.fromFloat(1.5), 0x3E00)
        XCTAssertEqual(Half.toFloat(0x3E00), 1.5)
    }
}
