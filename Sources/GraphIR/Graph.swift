/// An SSA value: a function input, a block input, or an operation output.
/// Identity matters (values are compared with `===`); the name is what the file calls it.
public final class Value: CustomStringConvertible {
    public var name: String
    public var type: MILType
    /// The operation that defines it (nil for function and block inputs).
    public internal(set) weak var producer: Op?

    public init(name: String, type: MILType) {
        self.name = name
        self.type = type
    }

    public var description: String { "\(type) \(name)" }
}

/// What one operand slot of an operation is bound to (MIL.proto `Argument.Binding`):
/// a value by name, or an immediate constant written inline (iOS18 constexpr inputs).
public enum Operand {
    case value(Value)
    case constant(ConstValue)

    public var value: Value? { if case let .value(v) = self { return v } else { return nil } }
    public var constant: ConstValue? { if case let .constant(c) = self { return c } else { return nil } }
    public var type: MILType {
        switch self {
        case let .value(v): return v.type
        case let .constant(c): return c.type
        }
    }
}

/// A named input of an operation with its bindings (more than one for variadic inputs,
/// e.g. `concat(values = (a, b, c))`).
public struct OpInput {
    public var name: String
    public var operands: [Operand]
    public init(name: String, operands: [Operand]) {
        self.name = name
        self.operands = operands
    }
}

/// A named attribute of an operation or a function/block/program (e.g. `name`, `val`).
public struct Attribute {
    public var name: String
    public var value: ConstValue
    public init(name: String, value: ConstValue) {
        self.name = name
        self.value = value
    }
}

/// One MIL operation: `outputs = type(inputs)[attributes] { blocks }`.
public final class Op {
    /// The MIL op type, e.g. `linear`, `slice_update`, `const`.
    public var type: String
    /// Named inputs in file order.
    public var inputs: [OpInput]
    public private(set) var outputs: [Value] = []
    /// Nested blocks (`cond`, `while_loop`).
    public var blocks: [Block]
    public var attributes: [Attribute]
    /// The block holding this operation.
    public internal(set) weak var parent: Block?

    public init(type: String, inputs: [OpInput] = [], outputs: [Value] = [], blocks: [Block] = [], attributes: [Attribute] = []) {
        self.type = type
        self.inputs = inputs
        self.blocks = blocks
        self.attributes = attributes
        setOutputs(outputs)
    }

    public func setOutputs(_ values: [Value]) {
        for v in outputs where v.producer === self { v.producer = nil }
        outputs = values
        for v in values { v.producer = self }
    }

    /// The op's name: the `name` attribute (coremltools sets it on every op), else the first output's name.
    public var name: String {
        attribute("name")?.stringValue ?? outputs.first?.name ?? type
    }

    public func attribute(_ name: String) -> ConstValue? {
        attributes.first { $0.name == name }?.value
    }

    public func input(_ name: String) -> OpInput? {
        inputs.first { $0.name == name }
    }

    /// The single operand bound to input `name`, or nil.
    public func operand(_ name: String) -> Operand? {
        guard let i = input(name), i.operands.count == 1 else { return nil }
        return i.operands[0]
    }

    /// The op producing the single value bound to input `name` when that op is of `type`, else
    /// nil: `log.producer(of: "x", type: "softmax")` matches `log(x = softmax(…))`.
    public func producer(of name: String, type: String) -> Op? {
        guard let p = operand(name)?.value?.producer, p.type == type else { return nil }
        return p
    }

    /// Every value this op reads (inputs in order).
    public var operandValues: [Value] {
        inputs.flatMap { $0.operands.compactMap(\.value) }
    }

    /// For a `const` op: its `val` attribute.
    public var constValue: ConstValue? { type == "const" ? attribute("val") : nil }
}

/// A list of operations with inputs and outputs (a function body or a nested block).
public final class Block {
    public var inputs: [Value]
    public private(set) var operations: [Op] = []
    /// Values returned by the block (may be defined in an enclosing scope).
    public var outputs: [Value]
    public var attributes: [Attribute]

    public init(inputs: [Value] = [], operations: [Op] = [], outputs: [Value] = [], attributes: [Attribute] = []) {
        self.inputs = inputs
        self.outputs = outputs
        self.attributes = attributes
        setOperations(operations)
    }

    public func setOperations(_ ops: [Op]) {
        operations = ops
        for op in ops { op.parent = self }
    }

    public func append(_ op: Op) {
        op.parent = self
        operations.append(op)
    }

    /// Every operation, nested blocks included, in program order (pre-order).
    public func walk(_ body: (Op) throws -> Void) rethrows {
        for op in operations {
            try body(op)
            for b in op.blocks { try b.walk(body) }
        }
    }
}

/// A MIL function: typed inputs (states after the regular inputs), an opset, and a body.
public final class Function {
    public var name: String
    public var inputs: [Value]
    /// The opset as stored in the proto, e.g. `CoreML8` (printed as `ios18`).
    public var opset: String
    public var body: Block
    /// Further `block_specializations` beyond the one keyed by `opset` (rare; kept for round trips).
    public var otherSpecializations: [(opset: String, block: Block)]
    public var attributes: [Attribute]

    public init(name: String, inputs: [Value], opset: String, body: Block, otherSpecializations: [(opset: String, block: Block)] = [], attributes: [Attribute] = []) {
        self.name = name
        self.inputs = inputs
        self.opset = opset
        self.body = body
        self.otherSpecializations = otherSpecializations
        self.attributes = attributes
    }

    public var outputs: [Value] { body.outputs }
    public var stateInputs: [Value] { inputs.filter { $0.type.isState } }

    /// MIL text opset tag: `CoreML8` → `ios18` (`CoreML5` → `ios15`, … `CoreML9` → `ios26`).
    public var opsetTag: String { Opset.textTag(opset) }
}

/// A MIL program: functions in file order, plus program attributes (e.g. `buildInfo`).
public final class Program {
    public var version: Int64
    public var functions: [Function]
    public var docString: String
    public var attributes: [Attribute]

    public init(version: Int64 = 1, functions: [Function] = [], docString: String = "", attributes: [Attribute] = []) {
        self.version = version
        self.functions = functions
        self.docString = docString
        self.attributes = attributes
    }

    public func function(named name: String) -> Function? {
        functions.first { $0.name == name }
    }
}

/// Opset strings: the proto's `CoreMLN` and the `iosNN` tag of MIL text.
public enum Opset {
    static let table: [(proto: String, tag: String, specVersion: Int)] = [
        ("CoreML5", "ios15", 6), ("CoreML6", "ios16", 7), ("CoreML7", "ios17", 8),
        ("CoreML8", "ios18", 9), ("CoreML9", "ios26", 10),
    ]
    public static func textTag(_ proto: String) -> String {
        table.first { $0.proto == proto }?.tag ?? proto
    }
    public static func proto(fromTag tag: String) -> String {
        table.first { $0.tag == tag }?.proto ?? tag
    }
    /// iOS version number of an opset (`CoreML8` → 18), nil when unknown.
    public static func iosVersion(_ proto: String) -> Int? {
        guard let tag = table.first(where: { $0.proto == proto })?.tag else { return nil }
        return Int(tag.dropFirst(3))
    }
}
