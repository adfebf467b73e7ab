/// Builds small MIL functions in Swift (for tests and for passes that create programs):
///
/// ```swift
/// let b = ProgramBuilder(opset: "CoreML8")
/// let x = b.input("x", .tensor(.fp32, [1, 4]))
/// let c = b.const("c", .fp32(1))
/// let y = b.op("add", ["x": x, "y": c], .tensor(.fp32, [1, 4]), name: "y")
/// let model = b.model(outputs: [y])
/// ```
public final class ProgramBuilder {
    public let opset: String
    public private(set) var inputs: [Value] = []
    public private(set) var ops: [Op] = []
    private var counter = 0

    public init(opset: String = "CoreML8") { self.opset = opset }

    /// Adds a function input (tensors, or `state<…>` types).
    public func input(_ name: String, _ type: MILType) -> Value {
        let v = Value(name: name, type: type)
        inputs.append(v)
        return v
    }

    /// Adds a `const` op.
    @discardableResult
    public func const(_ name: String, _ value: ConstValue) -> Value {
        let op = Op.const(name, value)
        ops.append(op)
        return op.outputs[0]
    }

    /// A float32 tensor constant.
    @discardableResult
    public func const(_ name: String, floats: [Float], shape: [Int]) -> Value {
        const(name, ConstValue(type: .tensor(.fp32, shape), payload: .tensor(.floats(floats))))
    }

    /// An int32 tensor constant (`shape` [] for a scalar).
    @discardableResult
    public func const(_ name: String, ints: [Int32], shape: [Int]) -> Value {
        const(name, ConstValue(type: .tensor(.int32, shape), payload: .tensor(.ints(ints))))
    }

    /// A bool tensor constant.
    @discardableResult
    public func const(_ name: String, bools: [Bool], shape: [Int]) -> Value {
        const(name, ConstValue(type: .tensor(.bool, shape), payload: .tensor(.bools(bools))))
    }

    /// Adds an op with one output (or none when `type` is nil); variadic inputs via `variadic`.
    @discardableResult
    public func op(_ opType: String, _ inputs: [String: Value], _ type: MILType?, name: String? = nil,
                   variadic: [String: [Value]] = [:]) -> Value? {
        counter += 1
        let n = name ?? "\(opType)_\(counter)"
        var ins = inputs.sorted { $0.key < $1.key }.map { OpInput(name: $0.key, operands: [.value($0.value)]) }
        ins += variadic.sorted { $0.key < $1.key }.map { OpInput(name: $0.key, operands: $0.value.map { .value($0) }) }
        let outs = type.map { [Value(name: n, type: $0)] } ?? []
        let op = Op(type: opType, inputs: ins, outputs: outs, attributes: [Attribute(name: "name", value: .string(n))])
        ops.append(op)
        return outs.first
    }

    /// Adds an op and returns its single output (for ops that have one).
    public func apply(_ opType: String, _ inputs: [String: Value], _ type: MILType, name: String? = nil, variadic: [String: [Value]] = [:]) -> Value {
        op(opType, inputs, type, name: name, variadic: variadic)!
    }

    public func function(_ name: String = "main", outputs: [Value]) -> Function {
        Function(name: name, inputs: inputs, opset: opset, body: Block(operations: ops, outputs: outputs))
    }

    /// A single-function model whose description lists the tensor inputs, outputs and states.
    public func model(outputs: [Value]) -> Model {
        let f = function(outputs: outputs)
        var d = ModelDescription()
        func feature(_ v: Value) -> FeatureDescription? {
            switch v.type {
            case let .tensor(t):
                guard let dt = ArrayDataType.allCases.first(where: { $0.dtype == t.dtype }) else { return nil }
                return FeatureDescription(name: v.name, kind: .multiArray(ArrayFeature(shape: t.fixedShape ?? [], dataType: dt)))
            case let .state(inner):
                guard let t = inner.tensorType, let dt = ArrayDataType.allCases.first(where: { $0.dtype == t.dtype }) else { return nil }
                return FeatureDescription(name: v.name, kind: .state(ArrayFeature(shape: t.fixedShape ?? [], dataType: dt)))
            default: return nil
            }
        }
        d.inputs = inputs.filter { !$0.type.isState }.compactMap(feature)
        d.states = inputs.filter { $0.type.isState }.compactMap(feature)
        d.outputs = outputs.compactMap(feature)
        let spec: Int32 = Opset.table.first { $0.proto == opset }.map { Int32($0.specVersion) } ?? 9
        return Model(specificationVersion: spec, description: d, program: Program(functions: [f]))
    }
}
