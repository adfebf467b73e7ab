import TestSupport
import XCTest

/// Per-op vectors for the compressed-weight `constexpr_*` kernels and `slice_update`
/// (`models-ir/opvectors/constexpr.json` + `.npz`, written by `tools/opvectors_constexpr.py`).
final class ConstexprKernelTests: XCTestCase {
    func testOpVectors() throws { try OpVectors.run(family: "constexpr") }
}
