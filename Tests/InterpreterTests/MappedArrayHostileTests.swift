import Foundation
import GraphIR
import Interpreter
import XCTest

/// `FILE:dtype:shape` specs with a bad shape: an error naming the shape, not "no such file"
/// for a path that is the whole spec, and no dimension silently dropped.
final class MappedArrayHostileTests: XCTestCase {
    func testABadShapeAfterADtypeIsNamedAsTheShape() {
        for (spec, shape) in [("t.bin:int8:-1,32", "-1,32"), ("t.bin:int8:", ""), ("t.bin:fp16:4x8", "4x8"), ("t.bin:int8:1,,2", "1,,2"), ("t.bin:int8:4,", "4,")] {
            XCTAssertThrowsError(try MappedArray.parse(spec: spec), spec) { e in
                XCTAssertTrue("\(e)".contains("bad shape '\(shape)' in '\(spec)'"), "\(spec): \(e)")
            }
        }
        // Not a dtype: a path with colons.
        XCTAssertEqual(try MappedArray.parse(spec: "a:b:c").path, "a:b:c")
        XCTAssertNil(try MappedArray.parse(spec: "a:b:c").dtype)
    }
}
