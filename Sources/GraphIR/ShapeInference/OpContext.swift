
/// A rule cannot infer this op (an input it needs is unknown, or a case it does not evaluate):
/// the declared types are used, their unknown dimensions become `?` (opaque), and with a
/// `reason` the symbolic run notes it (`shape_unknown`).
struct Unsupported: Error {
    var reason: String?
    init(_ reason: String? = nil) { self.reason = reason }
}

/// What a type rule sees of one op: its operands' symbolic types and values, and ways to fail.
struct OpContext {
    let op: Op
    let state: InferenceState
    let index: Int
    /// Values of outputs set by the rule (output index → value).
    var outputValues: [(Int, SymValue)] = []

    var isConcrete: Bool { state.isConcrete }

    func operand(_ name: String) -> Operand? { op.operand(name) }
    func has(_ name: String) -> Bool { op.input(name) != nil }

    func symType(_ o: Operand) -> SymType {
        switch o {
        case let .value(v): return state.types[ObjectIdentifier(v)] ?? state.symType(v.type, valueName: v.name)
        case let .constant(c): return state.symType(c.type, valueName: "const")
        }
    }

    func tensor(_ name: String) throws -> SymTensor {
        guard let o = operand(name), let t = symType(o).tensor else { throw Unsupported() }
        return t
    }
    func optTensor(_ name: String) throws -> SymTensor? {
        guard has(name) else { return nil }
        return try tensor(name)
    }
    func shape(_ name: String) throws -> [DimExpr] {
        guard let s = try tensor(name).shape else { throw Unsupported() }
        return s
    }
    /// Shapes of the operands of a variadic input (`concat.values`).
    func variadicTensors(_ name: String) throws -> [SymTensor] {
        guard let i = op.input(name) else { throw Unsupported() }
        return try i.operands.map { o in
            guard let t = symType(o).tensor else { throw Unsupported() }
            return t
        }
    }

    /// The constant behind an operand: an immediate, or the `val` of a `const` op.
    func constValue(_ name: String) -> ConstValue? {
        guard let o = operand(name) else { return nil }
        return o.constValue
    }

    func value(_ o: Operand) -> SymValue? {
        switch o {
        case let .value(v):
            if let known = state.values[ObjectIdentifier(v)] { return known }
            return nil
        case let .constant(c):
            return ContextHelpers.intValue(c)
        }
    }
    func value(_ name: String) -> SymValue? { operand(name).flatMap(value) }
    func elements(_ name: String) -> [DimExpr]? { value(name)?.elements() }
    /// All elements constant.
    func constInts(_ name: String) -> [Int]? {
        if let e = elements(name) {
            var out: [Int] = []
            for x in e { guard let c = x.constant else { return nil }; out.append(c) }
            return out
        }
        return constValue(name)?.ints()
    }
    func constInt(_ name: String) -> Int? {
        guard let v = constInts(name), v.count == 1 else { return nil }
        return v[0]
    }
    func bools(_ name: String) -> [Bool]? { constValue(name)?.doubles()?.map { $0 != 0 } }
    func bool(_ name: String, default d: Bool) -> Bool { bools(name)?.first ?? d }
    func string(_ name: String) -> String? { constValue(name)?.stringValue }

    mutating func setValue(_ v: SymValue?, output: Int = 0) {
        if let v { outputValues.append((output, v)) }
    }

    func fail(_ kind: ShapeIssue.Kind = .shapeError, _ message: String, _ shapes: [(String, IssueShape)] = []) -> RuleFailure {
        RuleFailure(kind: kind, message: message, shapes: shapes)
    }

    /// The op's output cannot be evaluated here: `?` and a note, not a failure.
    func unknown(_ reason: String) -> Unsupported { Unsupported(reason) }

    func warn(_ kind: ShapeIssue.Kind, _ message: String, _ shapes: [(String, IssueShape)] = []) {
        state.issues.append(ShapeIssue(kind: kind, opName: op.name, opType: op.type, opIndex: index, message: message,
                                       shapes: shapes.map { (name: $0.0, shape: $0.1) }))
    }

    /// Two dimensions the op needs equal: a definite mismatch fails; two different symbols are
    /// recorded as one flexible dimension.
    func requireEqual(_ a: DimExpr, _ b: DimExpr, _ what: String, _ shapes: [(String, IssueShape)]) throws {
        if a == b { return }
        if let d = (a - b).constant, d != 0 { throw fail(.shapeError, "\(what): \(a) ≠ \(b)", shapes) }
        if let sa = a.symbolName, let sb = b.symbolName { state.equalities.append((sa, sb)) }
    }

    func normalizeAxis(_ axis: Int, rank: Int) throws -> Int {
        let a = axis < 0 ? axis + rank : axis
        guard a >= 0, a < Swift.max(rank, 1) || (rank == 0 && a == 0) else {
            throw fail(.shapeError, "axis \(axis) is out of range for rank \(rank)")
        }
        return a
    }

    /// NumPy broadcasting of several shapes.
    func broadcast(_ named: [(String, [DimExpr])]) throws -> [DimExpr] {
        let rank = named.map(\.1.count).max() ?? 0
        var out: [DimExpr] = Array(repeating: 1, count: rank)
        let shapesText = named.map { ($0.0, IssueShape(shape: $0.1)) }
        for i in 0..<rank {
            var d: DimExpr = 1
            for (_, s) in named {
                let k = i - (rank - s.count)
                guard k >= 0 else { continue }
                d = try broadcastDim(d, s[k], axis: i, shapesText)
            }
            out[i] = d
        }
        return out
    }

    private func broadcastDim(_ a: DimExpr, _ b: DimExpr, axis: Int, _ shapes: [(String, IssueShape)]) throws -> DimExpr {
        if a == b { return a }
        if a.constant == 1 { return b }
        if b.constant == 1 { return a }
        if let x = a.constant, let y = b.constant {
            throw fail(.shapeError, "cannot broadcast: axis \(axis) is \(x) in one operand and \(y) in another", shapes)
        }
        if let sa = a.symbolName, let sb = b.symbolName {
            state.equalities.append((sa, sb))
            return a
        }
        // One side flexible, the other a fixed size > 1: valid only at 1 and at that size.
        if let c = a.constant ?? b.constant {
            let flex = a.constant == nil ? a : b
            if !flex.symbols.isEmpty && !isConcrete {
                warn(.broadcastSize1, "axis \(axis): flexible \(flex) broadcast against \(c); valid only when \(flex) is 1 (silently repeated) or \(c)", shapes)
            }
            return DimExpr(c)
        }
        if let d = (a - b).constant, d != 0 {
            throw fail(.shapeError, "cannot broadcast: axis \(axis) is \(a) in one operand and \(b) in another", shapes)
        }
        return .max(a, b)
    }
}

extension Operand {
    /// The value of an inline constant or of a value produced by `const`; nil otherwise.
    public var constValue: ConstValue? {
        switch self {
        case let .constant(c): return c
        case let .value(v):
            guard let p = v.producer, p.type == "const" else { return nil }
            return p.attribute("val")
        }
    }
}

enum ContextHelpers {
    /// The elements of a small integer constant.
    static func intValue(_ c: ConstValue) -> SymValue? {
        guard let t = c.type.tensorType, t.dtype.isInteger, let n = t.elementCount, n <= 4096, let v = c.ints() else { return nil }
        return .elements(v.map { DimExpr($0) })
    }
}
