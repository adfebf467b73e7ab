import Foundation
import GraphIR
@testable import Passes
import TestSupport
import XCTest

/// `diagnose` never traps: on every committed model, and on every shape rule fed operands of
/// odd ranks, negative / huge constants and symbolic sizes.
final class DiagnoseTotalityTests: XCTestCase {
    /// Every `.mlpackage` / `.mlmodel` / compiled `.mlmodelc` / `.mil` under models-ir/ (models-ir/large/ excluded).
    static func allModels() -> [String] {
        let root = Fixtures.path("")
        var out: [String] = []
        guard let e = FileManager.default.enumerator(atPath: root) else { return [] }
        while let rel = e.nextObject() as? String {
            if rel.hasPrefix("large") { e.skipDescendants(); continue }
            if rel.hasSuffix(".mlpackage") || rel.hasSuffix(".mlmodelc") { out.append(rel); e.skipDescendants() } else if rel.hasSuffix(".mlmodel") || rel.hasSuffix(".mil") { out.append(rel) }
        }
        return out.sorted()
    }

    func testDiagnoseEveryFixtureWithoutACrash() throws {
        let models = Self.allModels()
        XCTAssertGreaterThan(models.count, 20)
        var diagnosed = 0
        for rel in models {
            // Deliberately broken files are refused by the loader with a typed error.
            guard let model = try? ModelLoader.load(path: Fixtures.path(rel)) else { continue }
            for seq in [nil, [1, 2, 7, 64, 4096]] as [[Int]?] {
                let d = Diagnoser.diagnose(model, options: DiagnoseOptions(seq: seq))
                XCTAssertEqual(d.functions.count, model.program.functions.count, rel)
                _ = d.text(modelPath: rel)
                _ = d.json(modelPath: rel).render(pretty: false)
            }
            diagnosed += 1
        }
        XCTAssertGreaterThan(diagnosed, 18)
    }

    /// The package of Apple's Llama 3.1 recipe (tools/apple_recipe_llama.py): causalMask
    /// [1, 1, S, END] with END its own RangeDim, `past = END - S`, stacked 5-D caches written at
    /// [layer, :, :kv_heads, past:END, :]. Its `concat` of scalar shape entries trapped in the
    /// concat rule (SIGILL); now the writes are found and nothing is left unevaluated.
    func testAppleRecipePackageDiagnoses() throws {
        let model = try ModelLoader.load(path: Fixtures.path("diag/apple_recipe_llama.mlpackage"))
        let d = Diagnoser.diagnose(model)
        let writes = d.findings.filter { $0.code == "state_write_runtime_end" }
        XCTAssertEqual(writes.count, 4, d.text(modelPath: "apple_recipe_llama"))
        XCTAssertTrue(writes.allSatisfy { $0.message.contains("causalMask_3 - inputIds_1") }, writes.map(\.message).joined(separator: "\n"))
        XCTAssertFalse(d.findings.contains { $0.code == "shape_unknown" }, d.text(modelPath: "apple_recipe_llama"))
    }

    // MARK: - every rule, odd operands

    enum Kind: CaseIterable {
        case scalarZero, scalarNegative, scalarHuge, ints3, ints5, boolScalar, floatSym, floatScalar, intInput, floatRank5
    }

    /// Builds `op` with every input of its schema bound to `pick(i)` operands, runs inference
    /// symbolically and at two bindings.
    func infer(_ opType: String, _ pick: (Int) -> Kind) {
        guard let schema = OpRegistry.schema(opType) else { return }
        let sym = DimSymbol(name: "S", constraint: .range(lower: 1, upper: 64))
        var inputs: [Value] = []
        var ops: [Op] = []
        var n = 0
        func operand(_ kind: Kind) -> Operand {
            n += 1
            func ints(_ v: [Int32], _ shape: [Int]) -> Operand {
                let op = Op.const("c\(n)", ConstValue(type: .tensor(.int32, shape), payload: .tensor(.ints(v))))
                ops.append(op)
                return .value(op.outputs[0])
            }
            switch kind {
            case .scalarZero: return ints([0], [])
            case .scalarNegative: return ints([-9], [])
            case .scalarHuge: return ints([Int32.max], [])
            case .ints3: return ints([0, 2, -1], [3])
            case .ints5: return ints([1, 1, 1, 1, 1], [5])
            case .boolScalar:
                let op = Op.const("c\(n)", .bool(true))
                ops.append(op)
                return .value(op.outputs[0])
            case .floatSym:
                let v = Value(name: "in\(n)", type: .tensor(TensorType(.fp16, [.fixed(1), .symbol(sym), .fixed(4)])))
                inputs.append(v)
                return .value(v)
            case .floatScalar:
                let v = Value(name: "in\(n)", type: .tensor(TensorType(.fp16, [])))
                inputs.append(v)
                return .value(v)
            case .intInput:
                let v = Value(name: "in\(n)", type: .tensor(TensorType(.int32, [.fixed(1)])))
                inputs.append(v)
                return .value(v)
            case .floatRank5:
                let v = Value(name: "in\(n)", type: .tensor(TensorType(.fp16, [.fixed(2), .fixed(1), .fixed(2), .symbol(sym), .fixed(8)])))
                inputs.append(v)
                return .value(v)
            }
        }
        var opInputs: [OpInput] = []
        for (i, spec) in schema.inputs.enumerated() {
            let k = pick(i)
            if spec.variadic {
                opInputs.append(OpInput(name: spec.name, operands: [operand(k), operand(pick(i + 1)), operand(k)]))
            } else {
                opInputs.append(OpInput(name: spec.name, operands: [operand(k)]))
            }
        }
        let outs = (0..<2).map { Value(name: "out\($0)", type: .tensor(TensorType(.fp16, [.unknown, .fixed(3)]))) }
        let op = Op(type: opType, inputs: opInputs, outputs: opType == "write_state" ? [] : outs,
                    attributes: [Attribute(name: "name", value: .string("op"))])
        ops.append(op)
        let f = Function(name: "main", inputs: inputs, opset: "CoreML8",
                         body: Block(operations: ops, outputs: opType == "write_state" ? [] : [outs[0]]))
        let inference = ShapeInference(function: f, interface: nil)
        for b in [nil, ["S": 1], ["S": 64]] as [[String: Int]?] { _ = inference.infer(binding: b) }
        _ = Diagnoser.diagnose(function: f, interface: FunctionDescription(name: "main", inputs: [], outputs: [], states: []), options: DiagnoseOptions())
    }

    func testEveryShapeRuleIsTotal() {
        let kinds = Kind.allCases
        var runs = 0
        for opType in OpRegistry.allOps where OpRegistry.schema(opType)?.hasShapeRule ?? false {
            for shift in 0..<kinds.count {
                infer(opType) { kinds[($0 + shift) % kinds.count] }
                infer(opType) { kinds[($0 * 3 + shift) % kinds.count] }
                runs += 2
            }
        }
        XCTAssertGreaterThan(runs, 1000)
    }
}
