import GraphIR

/// Options of passes given on the command line (`--pass-option specialize_sequence.sizes=1,16`):
/// `pass.key` → value. Read by the passes that take options; set before a pass manager runs.
public enum PassOptions {
    nonisolated(unsafe) public static var values: [String: String] = [:]
}

/// `specialize_sequence`: rewrites each function with a flexible sequence dimension (a RangeDim
/// or EnumeratedShapes on `input_ids` / `tokens`, shared by every input axis the graph forces
/// equal) into one static function per size, `<name>_s<size>`, all sharing the states and the
/// weights (the writer stores each blob once): a multifunction package whose default function is
/// the smallest size (S = 1: decode). Shapes are inferred through the whole function at that
/// size and written into every value's type, so no symbolic dimension of that symbol is left
/// (other flexible dimensions, like Apple's recipe's separate `END`, stay flexible).
///
/// Why: Core ML fails on RangeDim / EnumeratedShapes programs with states (coremltools#2500,
/// #2548), and coremltools' stateful-models guide recommends static prefill / decode functions
/// sharing one state ("a flexible query length usually prevents Core ML from compiling the
/// kernels efficiently").
///
/// Sizes: `PassOptions.values["specialize_sequence.sizes"]` (`1,16,64`), default 1 and 64;
/// each clamped to the declared range, duplicates dropped.
///
/// ```
/// before:  func main(tensor<int32, [1, S]> input_ids, …)  S = RangeDim(1..64)
/// after:   func main_s1(tensor<int32, [1, 1]> input_ids, …)    (default function)
///          func main_s64(tensor<int32, [1, 64]> input_ids, …)
/// ```
/// - Throws: `PassError` when shape inference fails at a size (the function is not valid there).
public struct SpecializeSequence: Pass {
    public static let name = "specialize_sequence"
    public static let summary = "One static function per sequence size (default 1 and 64) sharing states and weights: a multifunction package."
    public init() {}

    static func sizes(lower: Int, upper: Int?, enumerated: [Int]?) -> [Int] {
        var asked = [1, 64]
        if let s = PassOptions.values["\(name).sizes"] {
            asked = s.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        }
        var out: [Int] = []
        for v in asked {
            var c = Swift.max(v, lower)
            if let u = upper { c = Swift.min(c, u) }
            if let e = enumerated, !e.contains(c) { c = e.min { abs($0 - v) < abs($1 - v) } ?? c }
            if !out.contains(c) { out.append(c) }
        }
        return out.sorted()
    }

    public func run(on model: Model) throws -> PassResult {
        var result = PassResult()
        var newFunctions: [Function] = []
        var newDescriptions: [FunctionDescription] = []
        var defaultName: String?
        let oldDefault = model.description.defaultFunctionName.isEmpty ? model.program.functions.first?.name : model.description.defaultFunctionName
        for f in model.program.functions {
            let iface = model.description.interface(of: f.name)
            let inference = ShapeInference(function: f, interface: iface)
            guard let seq = Diagnoser.sequenceSymbol(inference), let cls = inference.symbolClass(named: seq),
                  let constraint = cls.constraint else {
                newFunctions.append(f)
                newDescriptions.append(iface)
                continue
            }
            let sizes: [Int]
            switch constraint {
            case let .range(lo, hi): sizes = Self.sizes(lower: Swift.max(lo, 1), upper: hi, enumerated: nil)
            case let .enumerated(v): sizes = Self.sizes(lower: 1, upper: nil, enumerated: v)
            case .unconstrained: sizes = Self.sizes(lower: 1, upper: nil, enumerated: nil)
            }
            let members = Set(cls.members.map { "\($0.input)#\($0.axis)" })
            for s in sizes {
                let name = "\(f.name)_s\(s)"
                let g = FunctionClone.clone(f, name: name)
                // Fix the sequence axes of the inputs.
                for v in g.inputs {
                    guard case let .tensor(t) = v.type else { continue }
                    var shape = t.shape
                    for i in shape.indices where members.contains("\(v.name)#\(i)") { shape[i] = .fixed(s) }
                    v.type = .tensor(TensorType(t.dtype, shape))
                }
                var gi = iface
                gi.name = name
                gi.inputs = iface.inputs.map { feature in
                    guard case var .multiArray(a) = feature.kind else { return feature }
                    var shape = a.shape
                    var fixedAll = true
                    for i in 0..<(g.inputs.first { $0.name == feature.name }?.type.tensorType?.rank ?? shape.count) {
                        let d = g.inputs.first { $0.name == feature.name }?.type.tensorType?.shape[i]
                        if i < shape.count, let v = d?.fixedValue { shape[i] = v } else { fixedAll = false }
                    }
                    if fixedAll { a.shape = shape; a.flexibility = .none }
                    var out = feature
                    out.kind = .multiArray(a)
                    return out
                }
                // Infer every shape at this size and write it into the types.
                let inf = ShapeInference(function: g, interface: gi)
                let r = inf.infer(binding: [:])
                if let e = r.firstError {
                    throw PassError(pass: Self.name, "function '\(f.name)' at \(seq) = \(s): \(e)")
                }
                var typed = 0
                g.body.walk { op in
                    for v in op.outputs {
                        guard let t = r.type(of: v)?.tensor, let shape = t.fixedShape, let declared = v.type.tensorType,
                              declared.rank == shape.count || declared.shape.contains(.variadic) == false else { continue }
                        let new = TensorType(declared.dtype, fixed: shape)
                        if declared != new { v.type = .tensor(new); typed += 1 }
                    }
                }
                gi.outputs = iface.outputs.map { feature in
                    guard case var .multiArray(a) = feature.kind,
                          let v = g.outputs.first(where: { $0.name == feature.name }), let shape = v.type.tensorType?.fixedShape else { return feature }
                    a.shape = shape
                    a.flexibility = .none
                    var out = feature
                    out.kind = .multiArray(a)
                    return out
                }
                newFunctions.append(g)
                newDescriptions.append(gi)
                if f.name == oldDefault, defaultName == nil { defaultName = name }
                result.count("functions written", 1)
                result.count("types made static", typed)
            }
            result.count("flexible functions specialised")
        }
        guard result.changed else { return result }
        model.program.functions = newFunctions
        var d = model.description
        d.functions = newDescriptions
        d.defaultFunctionName = defaultName ?? newFunctions[0].name
        let def = d.interface(of: d.defaultFunctionName)
        d.inputs = def.inputs
        d.outputs = def.outputs
        d.states = def.states
        model.description = d
        if model.specificationVersion < 9 { model.specificationVersion = 9 }
        return result
    }
}

/// Deep copies of functions (values, ops, nested blocks; constants shared, they are immutable).
enum FunctionClone {
    static func clone(_ f: Function, name: String) -> Function {
        var map: [ObjectIdentifier: Value] = [:]
        func v(_ x: Value) -> Value {
            if let y = map[ObjectIdentifier(x)] { return y }
            return x   // defined outside (cannot happen in a valid function)
        }
        func fresh(_ x: Value) -> Value {
            let y = Value(name: x.name, type: x.type)
            map[ObjectIdentifier(x)] = y
            return y
        }
        func block(_ b: Block) -> Block {
            let inputs = b.inputs.map(fresh)
            var ops: [Op] = []
            for op in b.operations {
                let ins = op.inputs.map { i in
                    OpInput(name: i.name, operands: i.operands.map { o in
                        if case let .value(x) = o { return .value(v(x)) }
                        return o
                    })
                }
                let blocks = op.blocks.map(block)
                let outs = op.outputs.map(fresh)
                ops.append(Op(type: op.type, inputs: ins, outputs: outs, blocks: blocks, attributes: op.attributes))
            }
            return Block(inputs: inputs, operations: ops, outputs: b.outputs.map(v), attributes: b.attributes)
        }
        let inputs = f.inputs.map(fresh)
        let body = block(f.body)
        return Function(name: name, inputs: inputs, opset: f.opset, body: body, attributes: f.attributes)
    }
}
