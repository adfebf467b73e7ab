import GraphIR

/// Small builders shared by the fix passes: new ops named uniquely, inserted before an anchor.
struct OpMaker {
    var names: NameGenerator
    var made: [Op] = []
    init(_ f: Function) { names = NameGenerator(f) }

    mutating func op(_ type: String, _ base: String, _ inputs: [(String, Value)], _ out: MILType) -> Value {
        let n = names.fresh(base)
        let o = Op(type: type, inputs: inputs.map { OpInput(name: $0.0, operands: [.value($0.1)]) }, outputs: [Value(name: n, type: out)],
                   attributes: [Attribute(name: "name", value: .string(n))])
        made.append(o)
        return o.outputs[0]
    }

    mutating func const(_ base: String, _ c: ConstValue) -> Value {
        let o = Op.const(names.fresh(base), c)
        made.append(o)
        return o.outputs[0]
    }

    mutating func ints(_ base: String, _ v: [Int32], shape: [Int]? = nil) -> Value {
        const(base, ConstValue(type: .tensor(.int32, shape ?? [v.count]), payload: .tensor(.ints(v))))
    }

    mutating func bools(_ base: String, _ v: [Bool]) -> Value {
        const(base, ConstValue(type: .tensor(.bool, [v.count]), payload: .tensor(.bools(v))))
    }

    /// Inserts what was made before `anchor` (in its block), in order.
    mutating func flush(before anchor: Op) {
        guard let b = anchor.parent, var at = b.index(of: anchor) else { return }
        for o in made { b.insert(o, at: at); at += 1 }
        made = []
    }
}
