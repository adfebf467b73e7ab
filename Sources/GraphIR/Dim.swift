/// What the model description says about a flexible dimension.
public enum DimConstraint: Hashable, Sendable {
    /// Core ML `RangeDim`: `lower...upper`; `upper == nil` means unbounded (−1 in the file).
    case range(lower: Int, upper: Int?)
    /// The values this dimension takes across an input's `EnumeratedShapes`.
    case enumerated([Int])
    /// Flexible, with nothing known about its extent.
    case unconstrained
}

/// A named flexible dimension of a function input.
public struct DimSymbol: Hashable, Sendable, CustomStringConvertible {
    /// Stable name, `<input>_<axis>` (e.g. `input_ids_1`); the file stores no names.
    public var name: String
    public var constraint: DimConstraint

    public init(name: String, constraint: DimConstraint) {
        self.name = name
        self.constraint = constraint
    }

    /// The way Core ML users know it: `RangeDim(1..2048)`, `RangeDim(1..inf)`, `Enumerated(1|16)`.
    public var description: String {
        switch constraint {
        case let .range(lower, upper): return "RangeDim(\(lower)..\(upper.map(String.init) ?? "inf"))"
        case let .enumerated(values): return "Enumerated(\(values.map(String.init).joined(separator: "|")))"
        case .unconstrained: return "?"
        }
    }
}

/// One dimension of a tensor type.
public enum Dim: Hashable, Sendable, CustomStringConvertible {
    /// A fixed size.
    case fixed(Int)
    /// A flexible input dimension with what the description says about it.
    case symbol(DimSymbol)
    /// `?` — an unknown size (MIL `UnknownDimension`, variadic = false).
    case unknown
    /// An unknown number of dimensions (MIL `UnknownDimension`, variadic = true).
    case variadic

    public var fixedValue: Int? { if case let .fixed(v) = self { return v } else { return nil } }
    public var isFixed: Bool { fixedValue != nil }

    /// MIL text spelling: the size, or `?` (`...` for a variadic dimension).
    public var description: String {
        switch self {
        case let .fixed(v): return String(v)
        case .symbol, .unknown: return "?"
        case .variadic: return "..."
        }
    }
}
