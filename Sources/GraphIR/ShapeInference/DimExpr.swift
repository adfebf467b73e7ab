/// A symbolic dimension (or small integer value): a polynomial with integer coefficients over
/// atoms — flexible-dimension symbols (`input_ids_1`), opaque run-time values
/// (`cache_offset[0]`) and the non-linear results that do not simplify (`x floordiv 3`,
/// `min(S, 64)`). Canonical by construction: two equal polynomials compare equal, so
/// `S + 1 - 1 == S` and `(64*S) floordiv 64 == S`.
///
/// `+ − ×` are exact; `floorDiv`, `mod`, `min`, `max` fold constants, divide monomials
/// exactly where every term allows it, and otherwise become atoms.
public struct DimExpr: Hashable, Sendable, CustomStringConvertible, ExpressibleByIntegerLiteral {
    /// Monomial → coefficient (never 0). The empty monomial is the constant term.
    public private(set) var terms: [Monomial: Int]

    public init(_ c: Int) { terms = c == 0 ? [:] : [Monomial([]): c] }
    public init(integerLiteral c: Int) { self.init(c) }
    init(terms: [Monomial: Int]) { self.terms = terms.filter { $0.value != 0 } }

    /// A flexible-dimension symbol (bindable).
    public static func symbol(_ name: String) -> DimExpr { DimExpr(atom: .symbol(name)) }
    /// A run-time value or unknown size (never bound).
    public static func opaque(_ name: String) -> DimExpr { DimExpr(atom: .opaque(name)) }
    init(atom: DimAtom) { terms = [Monomial([atom]): 1] }

    /// The value when the expression is a constant.
    public var constant: Int? {
        if terms.isEmpty { return 0 }
        if terms.count == 1, let (m, c) = terms.first, m.atoms.isEmpty { return c }
        return nil
    }
    public var isConstant: Bool { constant != nil }
    var constantTerm: Int { terms[Monomial([])] ?? 0 }

    /// The symbol name when the expression is exactly one symbol.
    public var symbolName: String? {
        guard terms.count == 1, let (m, c) = terms.first, c == 1, m.atoms.count == 1,
              case let .symbol(s) = m.atoms[0] else { return nil }
        return s
    }

    /// Every flexible-dimension symbol the expression mentions.
    public var symbols: Set<String> {
        var s = Set<String>()
        for m in terms.keys { for a in m.atoms { s.formUnion(a.symbols) } }
        return s
    }
    /// True when the expression mentions a run-time (opaque) value.
    public var hasOpaque: Bool { terms.keys.contains { $0.atoms.contains { $0.hasOpaque } } }

    // MARK: arithmetic

    public static func + (a: DimExpr, b: DimExpr) -> DimExpr {
        var t = a.terms
        for (m, c) in b.terms { t[m, default: 0] &+= c }
        return DimExpr(terms: t)
    }
    public static prefix func - (a: DimExpr) -> DimExpr { DimExpr(terms: a.terms.mapValues { 0 &- $0 }) }
    public static func - (a: DimExpr, b: DimExpr) -> DimExpr { a + (-b) }
    public static func * (a: DimExpr, b: DimExpr) -> DimExpr {
        var t: [Monomial: Int] = [:]
        for (ma, ca) in a.terms { for (mb, cb) in b.terms { t[ma * mb, default: 0] &+= ca &* cb } }
        return DimExpr(terms: t)
    }

    /// Floor division (Python `//`, MIL `floor_div`).
    public static func floorDiv(_ a: DimExpr, _ b: DimExpr) -> DimExpr {
        if let x = a.constant, let y = b.constant, y != 0 { return DimExpr(floorDivInt(x, y)) }
        if b.constant == 1 { return a }
        if a.terms.isEmpty { return 0 }
        if let q = a.exactQuotient(b) { return q }
        return DimExpr(atom: .floorDiv(a, b))
    }
    /// Ceiling division for a positive divisor.
    public static func ceilDiv(_ a: DimExpr, _ b: DimExpr) -> DimExpr {
        if let y = b.constant, y > 0 { return floorDiv(a + DimExpr(y - 1), b) }
        if let q = a.exactQuotient(b) { return q }
        return -floorDiv(-a, b)
    }
    public static func mod(_ a: DimExpr, _ b: DimExpr) -> DimExpr {
        if let x = a.constant, let y = b.constant, y != 0 { return DimExpr(x &- floorDivInt(x, y) &* y) }
        if a.exactQuotient(b) != nil { return 0 }
        return DimExpr(atom: .mod(a, b))
    }
    public static func min(_ a: DimExpr, _ b: DimExpr) -> DimExpr {
        if let d = (a - b).constant { return d <= 0 ? a : b }
        let (x, y) = a.description <= b.description ? (a, b) : (b, a)
        return DimExpr(atom: .min(x, y))
    }
    public static func max(_ a: DimExpr, _ b: DimExpr) -> DimExpr {
        if let d = (a - b).constant { return d >= 0 ? a : b }
        let (x, y) = a.description <= b.description ? (a, b) : (b, a)
        return DimExpr(atom: .max(x, y))
    }

    /// Python's `//` (never traps: `Int.min // -1` wraps, a zero divisor gives 0 — callers
    /// check for 0 first).
    static func floorDivInt(_ x: Int, _ y: Int) -> Int {
        guard y != 0 else { return 0 }
        if y == -1 { return 0 &- x }
        let q = x / y
        return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q
    }

    /// `self / b` when `b` is one monomial (with coefficient) dividing every term exactly.
    func exactQuotient(_ b: DimExpr) -> DimExpr? {
        guard b.terms.count == 1, let (mb, cb) = b.terms.first, cb != 0 else { return nil }
        var t: [Monomial: Int] = [:]
        for (m, c) in terms {
            guard cb != -1 || c != Int.min, c % cb == 0, let q = m.dividing(by: mb) else { return nil }
            t[q, default: 0] += c / cb
        }
        return DimExpr(terms: t)
    }

    // MARK: evaluation

    /// The value with `binding` for the symbols (and opaque names, if given); nil when
    /// something stays unbound or a division by zero occurs.
    public func evaluate(_ binding: [String: Int]) -> Int? {
        var total = 0
        for (m, c) in terms {
            var p = c
            for a in m.atoms {
                guard let v = a.evaluate(binding) else { return nil }
                p = p &* v
            }
            total = total &+ p
        }
        return total
    }

    /// Replaces bound symbols by their values and re-simplifies.
    public func substituting(_ binding: [String: Int]) -> DimExpr { mapAtoms { $0.substituting(binding) } }

    /// Renames symbols (used to merge the names of one flexible dimension).
    public func renaming(_ map: [String: String]) -> DimExpr {
        guard !map.isEmpty else { return self }
        return mapAtoms { $0.renaming(map) }
    }

    /// The sum of products with every atom replaced by `f(atom)`, re-simplified.
    func mapAtoms(_ f: (DimAtom) -> DimExpr) -> DimExpr {
        var out = DimExpr(0)
        for (m, c) in terms {
            var p = DimExpr(c)
            for a in m.atoms { p = p * f(a) }
            out = out + p
        }
        return out
    }

    // MARK: printing

    public var description: String {
        if terms.isEmpty { return "0" }
        let sorted = terms.sorted { l, r in
            if l.key.atoms.isEmpty != r.key.atoms.isEmpty { return !l.key.atoms.isEmpty }
            return l.key < r.key
        }
        var out = ""
        for (i, (m, c)) in sorted.enumerated() {
            let body = m.description
            var piece: String
            if body.isEmpty { piece = String(c.magnitude) } else if c.magnitude == 1 { piece = body } else { piece = "\(c.magnitude)*\(body)" }
            if i == 0 { piece = (c < 0 ? "-" : "") + piece } else { piece = (c < 0 ? " - " : " + ") + piece }
            out += piece
        }
        return out
    }
}

/// A product of atoms (sorted; repeated atoms are powers).
public struct Monomial: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var atoms: [DimAtom]
    init(_ atoms: [DimAtom]) { self.atoms = atoms.sorted { $0.key < $1.key } }

    static func * (a: Monomial, b: Monomial) -> Monomial { Monomial(a.atoms + b.atoms) }

    func dividing(by d: Monomial) -> Monomial? {
        var rest = atoms
        for a in d.atoms {
            guard let i = rest.firstIndex(of: a) else { return nil }
            rest.remove(at: i)
        }
        return Monomial(rest)
    }

    public static func < (a: Monomial, b: Monomial) -> Bool { a.description < b.description }
    public var description: String { atoms.map(\.description).joined(separator: "*") }
}

/// An indivisible part of a ``DimExpr``.
public indirect enum DimAtom: Hashable, Sendable, CustomStringConvertible {
    case symbol(String)
    case opaque(String)
    case floorDiv(DimExpr, DimExpr)
    case mod(DimExpr, DimExpr)
    case min(DimExpr, DimExpr)
    case max(DimExpr, DimExpr)

    var key: String { description }

    public var description: String {
        switch self {
        case let .symbol(s): return s
        case let .opaque(s): return s
        case let .floorDiv(a, b): return "(\(a) floordiv \(b))"
        case let .mod(a, b): return "(\(a) mod \(b))"
        case let .min(a, b): return "min(\(a), \(b))"
        case let .max(a, b): return "max(\(a), \(b))"
        }
    }

    var symbols: Set<String> {
        switch self {
        case let .symbol(s): return [s]
        case .opaque: return []
        case let .floorDiv(a, b), let .mod(a, b), let .min(a, b), let .max(a, b): return a.symbols.union(b.symbols)
        }
    }
    var hasOpaque: Bool {
        switch self {
        case .symbol: return false
        case .opaque: return true
        case let .floorDiv(a, b), let .mod(a, b), let .min(a, b), let .max(a, b): return a.hasOpaque || b.hasOpaque
        }
    }

    func evaluate(_ binding: [String: Int]) -> Int? {
        switch self {
        case let .symbol(s), let .opaque(s): return binding[s]
        case let .floorDiv(a, b):
            guard let x = a.evaluate(binding), let y = b.evaluate(binding), y != 0 else { return nil }
            return DimExpr.floorDivInt(x, y)
        case let .mod(a, b):
            guard let x = a.evaluate(binding), let y = b.evaluate(binding), y != 0 else { return nil }
            return x &- DimExpr.floorDivInt(x, y) &* y
        case let .min(a, b):
            guard let x = a.evaluate(binding), let y = b.evaluate(binding) else { return nil }
            return Swift.min(x, y)
        case let .max(a, b):
            guard let x = a.evaluate(binding), let y = b.evaluate(binding) else { return nil }
            return Swift.max(x, y)
        }
    }

    func substituting(_ binding: [String: Int]) -> DimExpr {
        switch self {
        case let .symbol(s), let .opaque(s): return binding[s].map { DimExpr($0) } ?? DimExpr(atom: self)
        case let .floorDiv(a, b): return .floorDiv(a.substituting(binding), b.substituting(binding))
        case let .mod(a, b): return .mod(a.substituting(binding), b.substituting(binding))
        case let .min(a, b): return .min(a.substituting(binding), b.substituting(binding))
        case let .max(a, b): return .max(a.substituting(binding), b.substituting(binding))
        }
    }

    func renaming(_ map: [String: String]) -> DimExpr {
        switch self {
        case let .symbol(s): return .symbol(map[s] ?? s)
        case .opaque: return DimExpr(atom: self)
        case let .floorDiv(a, b): return .floorDiv(a.renaming(map), b.renaming(map))
        case let .mod(a, b): return .mod(a.renaming(map), b.renaming(map))
        case let .min(a, b): return .min(a.renaming(map), b.renaming(map))
        case let .max(a, b): return .max(a.renaming(map), b.renaming(map))
        }
    }
}

/// A shape of symbolic dimensions, printed like `[1, input_ids_1, 64]`.
public func describeShape(_ s: [DimExpr]?) -> String {
    guard let s else { return "[?rank]" }
    return "[" + s.map(\.description).joined(separator: ", ") + "]"
}
