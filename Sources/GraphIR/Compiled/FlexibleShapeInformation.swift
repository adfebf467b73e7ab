/// The `FlexibleShapeInformation` function attribute the Core ML compiler writes into a
/// compiled `model.mil` (facts sheet §6.3), read back into per-input shape facts — the
/// inverse of `MILPrinter.flexibleShapeInformation`.
///
/// Value: a tuple of `(section name, dict)` pairs —
/// `("DefaultShapes", {input: tensor<int32, [?]>})`,
/// `("RangeDims", {input: list<tensor<int32, [2]>, ?>})` (one `[lower, upper]` per dim,
/// upper −1 unbounded), `("EnumeratedShapes", {key: {input: shape}})` (keys are opaque).
public struct FlexibleShapeInformation: Hashable, Sendable {
    public struct Input: Hashable, Sendable {
        public var defaultShape: [Int]?
        public var flexibility: ShapeFlexibility
    }

    /// Per input name, in the order the sections first name them.
    public var inputs: [(name: String, info: Input)]

    public static func == (a: Self, b: Self) -> Bool {
        a.inputs.map(\.name) == b.inputs.map(\.name) && a.inputs.map(\.info) == b.inputs.map(\.info)
    }
    public func hash(into h: inout Hasher) { h.combine(inputs.map(\.name)) }

    public func input(_ name: String) -> Input? { inputs.first { $0.name == name }?.info }

    /// Reads the attribute value.
    /// - Throws: `Failure` (a reason) when the value is not shaped as above.
    public init(_ value: ConstValue) throws {
        inputs = []
        guard case let .tuple(sections) = value.payload else { throw Failure("not a tuple of (name, dict) sections") }
        var defaults: [String: [Int]] = [:]
        for section in sections {
            guard case let .tuple(pair) = section.payload, pair.count == 2, let title = pair[0].stringValue,
                  case let .dict(entries) = pair[1].payload else {
                throw Failure("a section is not a (string, dict) pair")
            }
            switch title {
            case "DefaultShapes":
                for e in entries {
                    guard let n = e.key.stringValue, let s = e.value.intsAnyShape() else { throw Failure("DefaultShapes entry is not {name, shape}") }
                    defaults[n] = s
                    touch(n)
                }
            case "RangeDims":
                for e in entries {
                    guard let n = e.key.stringValue, case let .list(pairs) = e.value.payload else { throw Failure("RangeDims entry is not {name, [[lower, upper], …]}") }
                    var ranges: [SizeRange] = []
                    for p in pairs {
                        guard let lu = p.intsAnyShape(), lu.count == 2, lu[0] >= 0 else { throw Failure("RangeDims of '\(n)' holds a range that is not [lower, upper]") }
                        ranges.append(SizeRange(lower: lu[0], upper: lu[1] < 0 ? nil : lu[1]))
                    }
                    touch(n)
                    set(n) { $0.flexibility = .range(ranges) }
                }
            case "EnumeratedShapes":
                var shapes: [String: [[Int]]] = [:]
                var order: [String] = []
                var seen: [String: Set<[Int]>] = [:]
                for e in entries {
                    guard case let .dict(inner) = e.value.payload else { throw Failure("EnumeratedShapes entry is not {key, {name: shape}}") }
                    for i in inner {
                        guard let n = i.key.stringValue, let s = i.value.intsAnyShape() else { throw Failure("EnumeratedShapes entry is not {name: shape}") }
                        if shapes[n] == nil { order.append(n) }
                        if seen[n, default: []].insert(s).inserted { shapes[n, default: []].append(s) }
                    }
                }
                for n in order {
                    touch(n)
                    set(n) { $0.flexibility = .enumerated(shapes[n] ?? []) }
                }
            default:
                continue // unknown sections are ignored
            }
        }
        for (i, entry) in inputs.enumerated() {
            var info = entry.info
            info.defaultShape = defaults[entry.name]
            // Core ML lists the default shape first among enumerated shapes (facts §6.2).
            if case var .enumerated(list) = info.flexibility, let d = info.defaultShape, let k = list.firstIndex(of: d), k > 0 {
                list.remove(at: k)
                list.insert(d, at: 0)
                info.flexibility = .enumerated(list)
            }
            inputs[i].info = info
        }
    }

    private var index: [String: Int] = [:]

    private mutating func touch(_ name: String) {
        if index[name] == nil {
            index[name] = inputs.count
            inputs.append((name, Input(defaultShape: nil, flexibility: .none)))
        }
    }

    private mutating func set(_ name: String, _ body: (inout Input) -> Void) {
        guard let i = index[name] else { return }
        body(&inputs[i].info)
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        init(_ s: String) { description = s }
    }
}

extension ConstValue {
    /// Integer elements of an immediate tensor whatever its declared shape (`[?]` included).
    func intsAnyShape() -> [Int]? {
        guard case let .tensor(storage) = payload else { return nil }
        switch storage {
        case let .ints(v): return v.map(Int.init)
        case let .longInts(v): return v.map { Int(truncatingIfNeeded: $0) }
        default:
            guard let t = type.tensorType, case let .bytes(b) = storage, t.dtype.isInteger, t.dtype.bitWidth >= 8 else { return nil }
            let n = b.count / (t.dtype.bitWidth / 8)
            return b.withUnsafeBytes { ElementDecoding.doubles(raw: $0, dtype: t.dtype, count: n) }?.map { Int($0) }
        }
    }
}
