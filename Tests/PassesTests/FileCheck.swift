import TestSupport
import XCTest

final class FileCheckTests: XCTestCase {
    func testMatcherFailsWhenItShould() {
        let text = "a = add(x)\nb = mul(a)\nc = relu(b)"
        XCTAssertNoThrow(try FileCheck.check(text, "CHECK: add\nCHECK-NEXT: mul\nCHECK-NOT: sub\nCHECK: relu"))
        XCTAssertThrowsError(try FileCheck.check(text, "CHECK: relu\nCHECK: add"))       // order
        XCTAssertThrowsError(try FileCheck.check(text, "CHECK: add\nCHECK-NEXT: relu"))   // not next
        XCTAssertThrowsError(try FileCheck.check(text, "CHECK: add\nCHECK-NOT: mul\nCHECK: relu"))
        XCTAssertThrowsError(try FileCheck.check(text, "CHECK-COUNT-2: = "))
        XCTAssertNoThrow(try FileCheck.check(text, "CHECK-COUNT-3: = "))
    }
}
