/// Checks of a model as a whole that Core ML makes when it loads one, so a model `run` would
/// refuse is refused by every verb (`dump`, `diagnose`, `optimize` included):
/// - at least one function, and every function returns at least one value;
/// - description multi-arrays (inputs, outputs, states, per-function interfaces): no negative
///   dimension, an element count that does not overflow, RangeDim `lower <= upper`, and a
///   non-empty EnumeratedShapes list of valid shapes;
/// - every op type is one ``OpRegistry`` or coremltools (``MILOpNames``) knows.
extension Verifier {
    /// - Throws: `ModelError.invalidProgram` naming the function or feature and what was expected.
    public static func verifyModel(_ model: Model, path: String) throws {
        guard !model.program.functions.isEmpty else {
            throw ModelError.invalidProgram(path: path, context: "program", reason: "has no functions (an ML Program needs at least one, usually 'main')")
        }
        for f in model.program.functions where f.body.outputs.isEmpty {
            throw ModelError.invalidProgram(path: path, context: "function '\(f.name)'", reason: "returns no outputs (a function needs at least one)")
        }
        let d = model.description
        try verifyFeatures(d.inputs, role: "input", path: path)
        try verifyFeatures(d.outputs, role: "output", path: path)
        try verifyFeatures(d.states, role: "state", path: path)
        for f in d.functions {
            try verifyFeatures(f.inputs, role: "function '\(f.name)' input", path: path)
            try verifyFeatures(f.outputs, role: "function '\(f.name)' output", path: path)
            try verifyFeatures(f.states, role: "function '\(f.name)' state", path: path)
        }
    }

    static func verifyFeatures(_ features: [FeatureDescription], role: String, path: String) throws {
        for f in features {
            guard let a = f.array else { continue }
            let context = "description \(role) '\(f.name)'"
            func fail(_ reason: String) -> ModelError { .invalidProgram(path: path, context: context, reason: reason) }
            try checkShape(a.shape, "shape", fail)
            switch a.flexibility {
            case .none:
                break
            case let .range(ranges):
                for (axis, r) in ranges.enumerated() {
                    if let upper = r.upper, r.lower > upper {
                        throw fail("RangeDim of dimension \(axis) has lower bound \(r.lower) above upper bound \(upper)")
                    }
                }
            case let .enumerated(shapes):
                guard !shapes.isEmpty else { throw fail("EnumeratedShapes lists no shapes (expected at least one)") }
                for (i, s) in shapes.enumerated() { try checkShape(s, "enumerated shape \(i)", fail) }
            }
        }
    }

    static func checkShape(_ shape: [Int], _ what: String, _ fail: (String) -> ModelError) throws {
        if let axis = shape.firstIndex(where: { $0 < 0 }) {
            throw fail("\(what) \(shape) has negative dimension \(shape[axis]) at axis \(axis) (expected sizes >= 0)")
        }
        guard CheckedSize.elementCount(shape) != nil else {
            throw fail("\(what) \(shape) has an element count that overflows")
        }
    }

    /// True when `type` is an op forge-ir or coremltools knows.
    public static func isKnownOpType(_ type: String) -> Bool {
        OpRegistry.schema(type) != nil || MILOpNames.all.contains(type)
    }
}
