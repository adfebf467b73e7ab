
/// A tensor type whose dimensions are ``DimExpr``s; `shape == nil` is an unknown rank.
public struct SymTensor: Hashable, Sendable, CustomStringConvertible {
    public var dtype: DType
    public var shape: [DimExpr]?
    public init(_ dtype: DType, _ shape: [DimExpr]?) { self.dtype = dtype; self.shape = shape }
    public var rank: Int? { shape?.count }
    public var description: String { "\(dtype.rawValue) \(describeShape(shape))" }
    /// Every dimension is a constant.
    public var fixedShape: [Int]? {
        guard let s = shape else { return nil }
        var out: [Int] = []
        for d in s { guard let v = d.constant else { return nil }; out.append(v) }
        return out
    }
}

/// The symbolic type of a value.
public enum SymType: Hashable, Sendable, CustomStringConvertible {
    case tensor(SymTensor)
    case state(SymTensor)
    /// list / tuple / dict: not tracked.
    case other(String)

    public var tensor: SymTensor? { if case let .tensor(t) = self { return t } else { return nil } }
    public var stateTensor: SymTensor? { if case let .state(t) = self { return t } else { return nil } }
    public var description: String {
        switch self {
        case let .tensor(t): return t.description
        case let .state(t): return "state<\(t)>"
        case let .other(s): return s
        }
    }
}

/// What is known about the contents of a small integer tensor (shapes, indices, lengths):
/// its elements, or an arithmetic progression of symbolic length (`range_1d`).
public enum SymValue: Hashable, Sendable, CustomStringConvertible {
    case elements([DimExpr])
    case range(start: DimExpr, step: DimExpr, count: DimExpr)

    /// The elements, expanding a range of constant length (at most `limit`).
    public func elements(limit: Int = 4096) -> [DimExpr]? {
        switch self {
        case let .elements(e): return e
        case let .range(start, step, count):
            guard let n = count.constant, n >= 0, n <= limit else { return nil }
            return (0..<n).map { start + step * DimExpr($0) }
        }
    }
    /// Every element is a compile-time constant.
    public var isConstant: Bool {
        switch self {
        case let .elements(e): return e.allSatisfy(\.isConstant)
        case let .range(s, st, c): return s.isConstant && st.isConstant && c.isConstant
        }
    }
    public var description: String {
        switch self {
        case let .elements(e): return e.count == 1 ? e[0].description : "[" + e.map(\.description).joined(separator: ", ") + "]"
        case let .range(s, st, c): return "range(start: \(s), step: \(st), count: \(c))"
        }
    }
}

/// One flexible dimension of a function: every input axis the file declares flexible and
/// that the graph forces to be equal (`input_ids[1]`, `causal_mask[2]`, `position_ids[1]`).
public struct SymbolClass: Sendable, CustomStringConvertible {
    /// The symbol's name: the first member's `<input>_<axis>`.
    public var name: String
    public var members: [Member]
    public struct Member: Hashable, Sendable, CustomStringConvertible {
        public var input: String
        public var axis: Int
        public var constraint: DimConstraint
        /// The size in the description's default shape, if any.
        public var defaultSize: Int?
        public var description: String { "\(input)[\(axis)]" }
    }

    /// The members' constraints intersected (nil when they have nothing in common).
    public var constraint: DimConstraint? {
        var lo = Int.min, hi: Int? = nil
        var values: Set<Int>? = nil
        var unconstrained = true
        for m in members {
            switch m.constraint {
            case let .range(l, u):
                unconstrained = false
                lo = Swift.max(lo, l)
                if let u { hi = hi.map { Swift.min($0, u) } ?? u }
            case let .enumerated(v):
                unconstrained = false
                values = values.map { $0.intersection(v) } ?? Set(v)
            case .unconstrained: break
            }
        }
        if unconstrained { return .unconstrained }
        if var v = values {
            v = v.filter { x in x >= lo && (hi.map { x <= $0 } ?? true) }
            if v.isEmpty { return nil }
            let order = members.compactMap { m -> [Int]? in if case let .enumerated(x) = m.constraint { return x } else { return nil } }.first ?? []
            return .enumerated(order.filter { v.contains($0) })
        }
        if let h = hi, h < lo { return nil }
        return .range(lower: lo, upper: hi)
    }

    /// Do the members disagree about the extent?
    public var hasConflictingConstraints: Bool {
        Set(members.map(\.constraint)).count > 1
    }

    public var isEnumerated: Bool { members.contains { if case .enumerated = $0.constraint { return true } else { return false } } }

    public var defaultSize: Int? { members.compactMap(\.defaultSize).first }

    public var constraintText: String {
        guard let c = constraint else { return "empty (members disagree)" }
        return DimSymbol(name: name, constraint: c).description
    }

    public var description: String {
        "\(name) = \(members.map(\.description).joined(separator: " = ")) : \(constraintText)"
    }

    /// Is `value` allowed by the (merged) constraint?
    public func admits(_ value: Int) -> Bool {
        switch constraint {
        case nil: return false
        case let .range(l, u)?: return value >= l && (u.map { value <= $0 } ?? true)
        case let .enumerated(v)?: return v.contains(value)
        case .unconstrained?: return value >= 1
        }
    }
}
