import GraphIR

/// Options of passes given on the command line (`--pass-option specialize_sequence.sizes=1,16`):
/// `pass.key` → value. Read by the passes that take options; set before a pass manager runs.
public enum PassOptions {
    nonisolated(unsafe) public static var values: [String: String] = [:]
    /// The `pass.key` options some pass reads (anything else is a typo to refuse).
    public static let known: [String] = ["\(SpecializeSequence.name).sizes"]
}

/// `specialize_sequence`: rewrites each function with a flexible sequence dimension (a RangeDim
/// or EnumeratedShapes on `input_ids` / `tokens`, shared by every input axis the graph forces
/// equal) into static functions, all sharing the states and the weights (the writer stores each
/// blob once): a multifunction package whose default function is the smallest size (S = 1:
/// decode). Shapes are inferred through the whole function at each size and written into every
/// value's type.
///
/// Every function it writes is fully static, because Core ML needs that: a fixed input next to
/// a RangeDim one in a stateful function aborts loading (coremltools#2548), and coremltools'
/// prefill/decode multifunction guide converts each function with static shapes only. An
/// attention-mask input `[B, H, Q, K]` whose query axis `Q` is its own flexible dimension gets
/// `Q = S`; when its key axis `K` is flexible too (Apple's Llama 3.1 recipe: `causalMask
/// [1, 1, S, END]`, the cache written at `END − S`), `END` is fixed as well, so the function is
/// one `(S, END)` point: `<name>_s<S>_end<END>`. In that recipe the mask's width *is* the cache
/// position, so a static decode function serves one position; the guide's static decode instead
/// takes a full-width mask and the position as inputs (a different contract, not this rewrite).
///
/// Sizes: `PassOptions.values["specialize_sequence.sizes"]`, entries `S` or `S:END`
/// (`1,16,64`; `5:5,1:6,1:7`), default 1 and 64; S clamped to the declared range, END (default
/// S: a prefill of an empty cache) clamped to the key axis' range; duplicates dropped. At most
/// 64 entries, each of whole numbers ≥ 1 (anything else is a `PassError`).
///
/// ```
/// before:  func main(tensor<int32, [1, S]> input_ids, …)  S = RangeDim(1..64)
/// after:   func main_s1(tensor<int32, [1, 1]> input_ids, …)    (default function)
///          func main_s64(tensor<int32, [1, 64]> input_ids, …)
/// before:  func main(tensor<int32, [1, S]> inputIds, tensor<fp16, [1, 1, Q, END]> causalMask, …)
/// after:   func main_s1_end6(tensor<int32, [1, 1]> inputIds, tensor<fp16, [1, 1, 1, 6]> causalMask, …)
/// ```
/// - Throws: `PassError` when shape inference fails at a size (the function is not valid there)
///   or an entry gives END < S (a negative count of cached tokens).
public struct SpecializeSequence: Pass {
    public static let info = PassInfo("specialize_sequence", "Static functions per sequence size (default 1 and 64; S:END for a growing mask) sharing states and weights: a multifunction package.")
    public init() {}

    /// One static function: the sequence size and, for a growing mask, its END.
    struct Point: Equatable {
        var s: Int
        var end: Int?
        var suffix: String { "_s\(s)" + (end.map { "_end\($0)" } ?? "") }
    }

    /// The input axes a static function fixes: `input#axis` keys.
    struct Axes {
        var sequence: Set<String> = []
        /// Mask query axes the graph does not tie to S (they take S).
        var query: Set<String> = []
        /// Mask key axes (END), and their declared constraint.
        var key: Set<String> = []
        var keyConstraint: DimConstraint?
    }

    static func axes(_ f: Function, _ inference: ShapeInference, sequence seq: String) -> Axes {
        var a = Axes()
        let rank = Dictionary(f.inputs.compactMap { v in v.type.tensorType.map { (v.name, $0.rank) } }, uniquingKeysWith: { x, _ in x })
        for c in inference.symbols {
            let keys = Set(c.members.map { "\($0.input)#\($0.axis)" })
            if c.name == seq { a.sequence = keys; continue }
            if c.members.allSatisfy({ rank[$0.input] == 4 && $0.axis == 2 }) { a.query.formUnion(keys) }
            if c.members.allSatisfy({ rank[$0.input] == 4 && $0.axis == 3 }) {
                a.key.formUnion(keys)
                a.keyConstraint = c.constraint
            }
        }
        return a
    }

    /// The S values asked (clamped), for tests and the default.
    static func sizes(lower: Int, upper: Int?, enumerated: [Int]?) -> [Int] {
        (try? points(lower: lower, upper: upper, enumerated: enumerated, key: nil).map(\.s)) ?? []
    }

    /// Most entries `sizes` takes.
    static let maxSizes = 64

    static func points(lower: Int, upper: Int?, enumerated: [Int]?, key: DimConstraint?) throws -> [Point] {
        var asked: [(Int, Int?)] = [(1, nil), (64, nil)]
        if let text = PassOptions.values["\(name).sizes"] {
            let entries = text.split(separator: ",", omittingEmptySubsequences: false)
            guard entries.count <= maxSizes else {
                throw PassError(pass: name, "sizes: \(entries.count) entries, at most \(maxSizes) (one static function each)")
            }
            asked = try entries.map { entry in
                let parts = entry.split(separator: ":", omittingEmptySubsequences: false).map { Int($0.trimmingCharacters(in: .whitespaces)) }
                guard parts.count <= 2, parts.allSatisfy({ ($0 ?? 0) >= 1 }) else {
                    throw PassError(pass: name, "sizes: entry '\(entry)' is not S or S:END of whole numbers ≥ 1 (e.g. 1,16,64 or 5:5,1:6)")
                }
                return (parts[0]!, parts.count > 1 ? parts[1] : nil)
            }
        }
        var out: [Point] = []
        for (v, e) in asked {
            var c = Swift.max(v, lower)
            if let u = upper { c = Swift.min(c, u) }
            if let en = enumerated, !en.contains(c) { c = en.min { abs($0 - v) < abs($1 - v) } ?? c }
            var end: Int?
            if let key {
                var x = e ?? c
                switch key {
                case let .range(lo, hi): x = Swift.max(x, lo); if let hi { x = Swift.min(x, hi) }
                case let .enumerated(en): if !en.contains(x) { x = en.min { abs($0 - x) < abs($1 - x) } ?? x }
                case .unconstrained: break
                }
                guard x >= c else {
                    throw PassError(pass: name, "END = \(x) is less than S = \(c): the mask's last dimension counts the cached tokens plus the S new ones")
                }
                end = x
            }
            let p = Point(s: c, end: end)
            if !out.contains(p) { out.append(p) }
        }
        return out.sorted { ($0.s, $0.end ?? 0) < ($1.s, $1.end ?? 0) }
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
            let axes = Self.axes(f, inference, sequence: seq)
            let key = axes.key.isEmpty ? nil : (axes.keyConstraint ?? .unconstrained)
            let points: [Point]
            switch constraint {
            case let .range(lo, hi): points = try Self.points(lower: Swift.max(lo, 1), upper: hi, enumerated: nil, key: key)
            case let .enumerated(v): points = try Self.points(lower: 1, upper: nil, enumerated: v, key: key)
            case .unconstrained: points = try Self.points(lower: 1, upper: nil, enumerated: nil, key: key)
            }
            for p in points {
                let (g, gi, typed) = try specialise(f, iface, axes: axes, at: p, symbol: seq, in: model)
                newFunctions.append(g)
                newDescriptions.append(gi)
                if f.name == oldDefault, defaultName == nil { defaultName = g.name }
                result.count("functions written", 1)
                result.count("types made static", typed)
                if p.end != nil { result.count("functions at one cache position (mask END fixed)") }
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

    /// One static copy of `f` at `p`: input axes fixed, every shape inferred and written.
    func specialise(_ f: Function, _ iface: FunctionDescription, axes: Axes, at p: Point, symbol seq: String, in model: Model) throws -> (Function, FunctionDescription, Int) {
        let name = f.name + p.suffix
        let g = FunctionClone.clone(f, name: name)
        for v in g.inputs {
            guard case let .tensor(t) = v.type else { continue }
            var shape = t.shape
            for i in shape.indices {
                let k = "\(v.name)#\(i)"
                if axes.sequence.contains(k) || axes.query.contains(k) { shape[i] = .fixed(p.s) }
                if axes.key.contains(k), let e = p.end { shape[i] = .fixed(e) }
            }
            v.type = .tensor(TensorType(t.dtype, shape))
        }
        var gi = iface
        gi.name = name
        gi.inputs = iface.inputs.map { feature in
            guard case var .multiArray(a) = feature.kind, let t = g.inputs.first(where: { $0.name == feature.name })?.type.tensorType,
                  let shape = t.fixedShape else { return feature }
            a.shape = shape
            a.flexibility = .none
            var out = feature
            out.kind = .multiArray(a)
            return out
        }
        var typed = try retype(g, gi, what: "function '\(f.name)' at \(seq) = \(p.s)\(p.end.map { ", END = \($0)" } ?? "")")
        // Shape arithmetic the rules leave symbolic (a `tile` whose reps are `real_div` of two
        // `shape`s) becomes constant once its `shape` inputs are static: fold it with the
        // interpreter's kernels (const_elimination, integer results only: float ops stay run-time
        // ops, so the numerics do not change) and infer again, until every type is static.
        for _ in 0..<4 where Self.hasNonStatic(g) {
            let folded = try ConstElimination(integerOnly: true).run(on: g, in: model)
            guard folded.changed else { break }
            let more = try retype(g, gi, what: "function '\(f.name)' at \(seq) = \(p.s)")
            typed += more
            if more == 0 { break }
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
        return (g, gi, typed)
    }

    /// Infers every shape of `g` (static inputs) and writes the static ones into the types.
    func retype(_ g: Function, _ gi: FunctionDescription, what: String) throws -> Int {
        let r = ShapeInference(function: g, interface: gi).infer(binding: [:])
        if let e = r.firstError { throw PassError(pass: Self.name, "\(what): \(e)") }
        var typed = 0
        g.body.walk { op in
            for v in op.outputs {
                guard let t = r.type(of: v)?.tensor, let shape = t.fixedShape, let declared = v.type.tensorType,
                      declared.rank == shape.count || declared.shape.contains(.variadic) == false else { continue }
                let new = TensorType(declared.dtype, fixed: shape)
                if declared != new { v.type = .tensor(new); typed += 1 }
            }
        }
        return typed
    }

    static func hasNonStatic(_ g: Function) -> Bool {
        var found = false
        g.body.walk { op in
            for v in op.outputs where v.type.tensorType != nil && v.type.tensorType?.fixedShape == nil { found = true }
        }
        return found
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
