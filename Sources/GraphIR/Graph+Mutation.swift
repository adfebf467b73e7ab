/// Editing the IR (for passes). Uses are not stored; they are computed on demand with
/// ``UseMap`` so that the core types stay plain.
extension Op {
    /// Replaces every operand that is `old` with `new` in this op's inputs.
    public func replaceOperand(_ old: Value, with new: Value) {
        for i in inputs.indices {
            for j in inputs[i].operands.indices {
                if case let .value(v) = inputs[i].operands[j], v === old { inputs[i].operands[j] = .value(new) }
            }
        }
    }

    /// Sets input `name` to a single operand (adding it if absent).
    public func setInput(_ name: String, _ operand: Operand) {
        if let i = inputs.firstIndex(where: { $0.name == name }) {
            inputs[i].operands = [operand]
        } else {
            inputs.append(OpInput(name: name, operands: [operand]))
        }
    }

    public func removeInput(_ name: String) { inputs.removeAll { $0.name == name } }
}

extension Block {
    /// Replaces every use of `old` by `new` in this block (nested blocks and outputs included),
    /// starting after op index `from` when given.
    public func replaceAllUses(of old: Value, with new: Value) {
        for op in operations {
            op.replaceOperand(old, with: new)
            for b in op.blocks { b.replaceAllUses(of: old, with: new) }
        }
        for i in outputs.indices where outputs[i] === old { outputs[i] = new }
    }

    /// Inserts `op` before the op at `index`.
    public func insert(_ op: Op, at index: Int) {
        var ops = operations
        ops.insert(op, at: index)
        setOperations(ops)
    }

    /// Removes the ops for which `shouldRemove` is true.
    public func removeOps(where shouldRemove: (Op) -> Bool) {
        setOperations(operations.filter { !shouldRemove($0) })
    }

    public func index(of op: Op) -> Int? { operations.firstIndex { $0 === op } }
}

/// Who reads each value in a function (op inputs, nested blocks, block outputs).
public struct UseMap {
    public private(set) var users: [ObjectIdentifier: [Op]] = [:]
    public private(set) var returned: Set<ObjectIdentifier> = []

    public init(_ function: Function) {
        add(function.body)
    }

    mutating func add(_ block: Block) {
        for op in block.operations {
            for v in op.operandValues {
                users[ObjectIdentifier(v), default: []].append(op)
            }
            for b in op.blocks { add(b) }
        }
        for v in block.outputs { returned.insert(ObjectIdentifier(v)) }
    }

    public func users(of v: Value) -> [Op] { users[ObjectIdentifier(v)] ?? [] }
    public func isReturned(_ v: Value) -> Bool { returned.contains(ObjectIdentifier(v)) }
    public func isUsed(_ v: Value) -> Bool { !users(of: v).isEmpty || isReturned(v) }
}

/// Builds ops and fresh names inside a function (for passes and the Swift builder).
public struct NameGenerator {
    private var used: Set<String>
    public init(_ function: Function) {
        var s = Set(function.inputs.map(\.name))
        function.body.walk { op in for v in op.outputs { s.insert(v.name) }; s.insert(op.name) }
        used = s
    }
    /// `base`, or `base_1`, `base_2`… the first name not in use.
    public mutating func fresh(_ base: String) -> String {
        if used.insert(base).inserted { return base }
        var i = 1
        while !used.insert("\(base)_\(i)").inserted { i += 1 }
        return "\(base)_\(i)"
    }
}

extension Op {
    /// A `const` op holding `value`, with output `name`.
    public static func const(_ name: String, _ value: ConstValue) -> Op {
        Op(type: "const", outputs: [Value(name: name, type: value.type)],
           attributes: [Attribute(name: "name", value: .string(name)), Attribute(name: "val", value: value)])
    }
}
