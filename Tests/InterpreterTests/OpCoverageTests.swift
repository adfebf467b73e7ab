import GraphIR
@testable import Interpreter
import TestSupport
import XCTest

/// The op table is the one truth: every schema has a kernel and a shape rule, or is listed
/// with the reason it has none; no name is registered twice; every kernel belongs to a schema.
final class OpCoverageTests: XCTestCase {
    func testNoOpIsRegisteredTwice() {
        XCTAssertEqual(OpRegistry.duplicateNames, [], "op schemas declared twice")
        XCTAssertEqual(KernelRegistry.duplicateNames, [], "kernels registered by two families")
    }

    func testEveryKernelHasASchema() {
        let orphans = KernelRegistry.builtins.keys.filter { OpRegistry.schema($0) == nil }.sorted()
        XCTAssertEqual(orphans, [], "kernels for ops the op table does not declare")
    }

    func testEverySchemaHasAKernelOrAReason() {
        let missing = OpRegistry.allOps.filter { KernelRegistry.builtins[$0] == nil && KernelRegistry.withoutKernel[$0] == nil }
        XCTAssertEqual(missing, [], "schemas with no kernel and no entry in KernelRegistry.withoutKernel")
        let stale = KernelRegistry.withoutKernel.keys.filter { KernelRegistry.builtins[$0] != nil || OpRegistry.schema($0) == nil }.sorted()
        XCTAssertEqual(stale, [], "KernelRegistry.withoutKernel lists ops that have a kernel or no schema")
    }

    func testEverySchemaHasAShapeRuleOrAReason() {
        let missing = OpRegistry.allOps.filter { OpRegistry.schema($0)?.hasShapeRule == false && OpRegistry.declaredTypeOnly[$0] == nil }
        XCTAssertEqual(missing, [], "schemas with no shape rule and no entry in OpRegistry.declaredTypeOnly")
        let stale = OpRegistry.declaredTypeOnly.keys.filter { OpRegistry.schema($0)?.hasShapeRule != false }.sorted()
        XCTAssertEqual(stale, [], "OpRegistry.declaredTypeOnly lists ops that have a rule or no schema")
    }
}
