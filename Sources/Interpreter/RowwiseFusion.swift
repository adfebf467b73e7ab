import Foundation
import GraphIR

/// Execution-level fusion of row-wise op regions (never written back): a connected set of
/// elementwise ops and last-axis reductions whose values are read only inside the set becomes
/// one step that runs the ops row by row, each row's values kept in a small scratch buffer.
/// An RMSNorm is the common case, in whatever form the converter wrote it (torch's
/// `x * rsqrt(mean(x²) + eps) * w`, or the fp16-safe form scaled by `max|x|`):
///
/// ```
/// // before: 6 steps, 5 intermediate [1, S, 576] or [1, S, 1] tensors
/// %sq = mul(x = %x, y = %x)
/// %ms = reduce_mean(x = %sq, axes = [-1], keep_dims = true)
/// %me = add(x = %ms, y = 1e-5)
/// %r  = rsqrt(x = %me)
/// %n  = mul(x = %x, y = %r)
/// %y  = mul(x = %n, y = %w)
/// // after: one step computing %y from %x and %w, row by row
/// ```
///
/// Whatever the op order, a region is found from its output op back through the producers
/// whose every reader is in the region. Ops: `abs`, `square`, `sqrt`, `rsqrt`, `inverse`,
/// `clip`, `relu`, `sigmoid`, `silu` (SwiGLU's `silu(gate) · up`), `add`, `sub`, `mul`, `real_div`, `maximum`, `minimum`, `reduce_sum` /
/// `reduce_mean` / `reduce_max` / `reduce_min` over the last axis with `keep_dims = true`, and
/// on the last axis only `slice_by_index` (stride 1, every other axis whole) and `concat`
/// (so RoPE's `rotate_half` — two slices, a negation, a concat — joins its `x·cos + r·sin`);
/// float outputs of one rank whose last dim is static; parameters (`epsilon`, `alpha`, `beta`,
/// `axes`, `begin`, `end`, masks) constant. Each op computes as its own
/// kernel does (the same Float operations and row sums: ``Reduce/row(_:_:_:)``, the
/// MIL-default epsilons), so the results are bit-identical to the unfused graph. Runs only in
/// `fp32` precision (`fp16` rounds every op output). Operands whose run-time shapes are not
/// rows of the output, a vector along the last axis, one value per row or a scalar run the
/// original ops instead (``FusedFallback``).
enum RowwiseFusion {
    static let kind = "rowwise"
    /// The first input name of a fused step.
    static let firstInputName = "rowwise.e0"
    /// Smallest region worth a step of its own.
    static let minimumOps = 2

    /// The ops without parameters, by MIL name (the others: `rsqrt`, `inverse`, `clip`, the
    /// reductions, `slice_by_index`, `concat`).
    static let plain: [String: Code] = [
        "abs": .abs, "square": .square, "sqrt": .sqrt, "relu": .relu, "sigmoid": .sigmoid, "silu": .silu,
        "add": .add, "sub": .sub, "mul": .mul, "real_div": .div, "maximum": .maximum, "minimum": .minimum,
    ]
    /// Unary ops with constant parameters.
    static let parameterized: Set<String> = ["rsqrt", "inverse", "clip"]
    static let reductions: [String: ReductionKernels.Mode] = ["reduce_sum": .sum, "reduce_mean": .mean, "reduce_max": .max, "reduce_min": .min]

    static func isFused(_ st: ExecutionPlan.Step) -> Bool { st.inputs.first?.name == firstInputName }

    /// Where an instruction reads a value: a value made in the region, or a fused-step input.
    enum Arg {
        case local(Int)
        case external(Int)
    }

    enum Code {
        case abs, square, sqrt, relu, sigmoid, silu
        case rsqrt(Float), inverse(Float)
        case clip(Float, Float)
        case add, sub, mul, div, maximum, minimum
        case reduce(ReductionKernels.Mode)
        /// Values `start ..< start + width` of the operand's row.
        case slice(Int)
        /// The operands' rows one after another (`Instruction/rest` after `a`).
        case concat

        /// Reads `x` and `y`.
        var isBinary: Bool {
            switch self {
            case .add, .sub, .mul, .div, .maximum, .minimum: return true
            default: return false
            }
        }
    }

    struct Instruction {
        let code: Code
        let a: Arg
        let b: Arg?
        /// `concat`'s operands after `a`.
        var rest: [Arg] = []
        /// The local value written, and its width (values a row).
        let out: Int
        let width: Int
    }

    /// A region at plan time, ready to run.
    struct Program {
        let instructions: [Instruction]
        /// Width (values a row) of each local.
        let widths: [Int]
        /// Width of each external data operand (0: a parameter).
        let externalWidths: [Int]
        /// The widest local (the scratch pitch).
        let width: Int
        /// Rank of every value of the region (and of the output).
        let rank: Int
        let outputDType: DType
        /// External inputs read as data (others are constant parameters).
        let dataExternals: [Int]
        /// For each `concat`, for each operand, the external inputs its value is computed from:
        /// concat (unlike the elementwise ops) does not broadcast, so at run time the operands'
        /// leading dims (the broadcast of those inputs') must be equal.
        var concatOperandSources: [[[Int]]] = []
    }

    /// Rewrites `plan`'s steps in place; returns every fused region (no candidate is reported
    /// unfused: a lone elementwise op is not a miss). With `refuse` set nothing is rewritten.
    static func apply(_ plan: ExecutionPlan.BlockPlan, useCount: [Int: Int], protected: Set<Int> = [],
                      constant: @escaping (Int) -> ConstValue?, refuse: Bool = false) -> [FusionSite] {
        guard !refuse else { return [] }
        let scratch = Scratch()
        var producer: [Int: Int] = [:]
        for (i, st) in plan.steps.enumerated() { for s in st.outputSlots { producer[s] = i } }
        func constValue(_ r: ExecutionPlan.Ref) -> ConstValue? {
            switch r {
            case let .constant(i): return constant(i)
            case let .slot(s):
                guard let i = producer[s], plan.steps[i].op.type == "const" else { return nil }
                return plan.steps[i].op.constValue
            }
        }
        let matcher = Matcher(plan: plan, constValue: constValue)
        var taken = Set<Int>()
        var sites: [FusionSite] = []
        var replace: [Int: ExecutionPlan.Step] = [:]
        for i in plan.steps.indices.reversed() where !taken.contains(i) {
            guard let rank = matcher.rowShape(i)?.rank else { continue }
            // Grow back from the output op: a producer joins when every read of its output is
            // by a member (so no value made inside is needed outside).
            var region: Set<Int> = [i]
            var grew = true
            while grew {
                grew = false
                for j in region {
                    for s in matcher.dataSlots(plan.steps[j]) {
                        guard let p = producer[s], !region.contains(p), !taken.contains(p),
                              let shape = matcher.rowShape(p), shape.rank == rank,
                              plan.steps[p].outputSlots.count == 1, !protected.contains(s) else { continue }
                        let reads = region.reduce(0) { n, m in n + matcher.reads(of: s, by: plan.steps[m]) } + matcher.reads(of: s, by: plan.steps[p])
                        guard reads == useCount[s] else { continue }
                        region.insert(p)
                        grew = true
                    }
                }
            }
            guard region.count >= minimumOps else { continue }
            let order = region.sorted()
            guard let fallback = FusedFallback(order.map { plan.steps[$0] }),
                  let program = matcher.program(order, fallback: fallback, rank: rank) else { continue }
            let root = plan.steps[i]
            let site = FusionSite(kind: kind, op: root.op.name, reason: nil)
            let runtime = Runtime(program: program, fallback: fallback, site: site, scratch: scratch)
            let inputs = fallback.externals.enumerated().map { k, r in (name: k == 0 ? firstInputName : "rowwise.e\(k)", refs: [r]) }
            replace[i] = ExecutionPlan.Step(op: root.op, kernel: runtime.kernel, inputs: inputs, outputSlots: root.outputSlots,
                                            release: [], isConstant: false, blocks: [])
            taken.formUnion(region)
            sites.append(site)
        }
        guard !replace.isEmpty else { return sites }
        plan.steps = plan.steps.enumerated().compactMap { i, st in
            if let r = replace[i] { return r }
            return taken.contains(i) ? nil : st
        }
        return sites.reversed()
    }

    /// Plan-time questions about steps.
    struct Matcher {
        let plan: ExecutionPlan.BlockPlan
        let constValue: (ExecutionPlan.Ref) -> ConstValue?

        /// Data input names of a row op (the others are its parameters).
        static func dataInputs(_ type: String) -> [String]? {
            if let c = plain[type] { return c.isBinary ? ["x", "y"] : ["x"] }
            if parameterized.contains(type) || reductions[type] != nil || type == "slice_by_index" { return ["x"] }
            if type == "concat" { return ["values"] }
            return nil
        }

        func dataSlots(_ st: ExecutionPlan.Step) -> [Int] {
            guard let names = Matcher.dataInputs(st.op.type) else { return [] }
            return st.inputs.filter { names.contains($0.name) }.flatMap(\.refs).compactMap {
                if case let .slot(s) = $0 { return s } else { return nil }
            }
        }

        func reads(of s: Int, by st: ExecutionPlan.Step) -> Int {
            st.inputs.reduce(0) { n, input in n + input.refs.filter { if case let .slot(x) = $0 { return x == s } else { return false } }.count }
        }

        /// Rank and last dim of a row op's (one, float) output; nil when the step is no row op.
        func rowShape(_ i: Int) -> (rank: Int, width: Int)? {
            let st = plan.steps[i]
            guard Matcher.dataInputs(st.op.type) != nil, st.blocks.isEmpty, st.kernel != nil, !st.isConstant,
                  st.op.outputs.count == 1, let t = st.op.outputs[0].type.tensorType, t.dtype.isFloat,
                  !t.shape.contains(.variadic), let d = t.shape.last?.fixedValue, d >= 1 else { return nil }
            return (t.shape.count, d)
        }

        /// The instructions of the region `order` (plan step indices, ascending), or nil when an
        /// op's parameters or operand shapes do not fit a row program.
        func program(_ order: [Int], fallback: FusedFallback, rank: Int) -> Program? {
            var instructions: [Instruction] = []
            var widths = [Int](repeating: 0, count: fallback.steps.reduce(0) { $0 + $1.outputs.count })
            var externalWidths = [Int](repeating: 0, count: fallback.externals.count)
            /// The external inputs each local is computed from.
            var sources = [Set<Int>](repeating: [], count: widths.count)
            var concatOperandSources: [[[Int]]] = []
            func sourcesOf(_ a: Arg) -> Set<Int> {
                switch a {
                case let .local(l): return sources[l]
                case let .external(e): return [e]
                }
            }
            for (k, i) in order.enumerated() {
                let st = plan.steps[i], local = fallback.steps[k]
                guard let shape = rowShape(i), local.outputs.count == 1 else { return nil }
                let width = shape.width
                /// Operand `ref` of declared type `t`, with its width (values a row).
                func arg(_ ref: FusedFallback.Ref, _ t: TensorType?) -> (Arg, Int)? {
                    switch ref {
                    case let .local(l): return (.local(l), widths[l])
                    case let .external(e):
                        // An outside operand: rows (or one value a row) of this rank, a vector, or a scalar.
                        guard let t, t.dtype.isFloat, !t.shape.contains(.variadic), t.shape.count <= rank else { return nil }
                        let w = t.shape.isEmpty ? 1 : (t.shape.last?.fixedValue ?? 0)
                        guard w >= 1, externalWidths[e] == 0 || externalWidths[e] == w else { return nil }
                        externalWidths[e] = w
                        return (.external(e), w)
                    }
                }
                func arg(_ name: String) -> (Arg, Int)? {
                    guard let refs = local.inputs.first(where: { $0.name == name })?.refs, refs.count == 1 else { return nil }
                    return arg(refs[0], operandType(st, name))
                }
                func constant(_ name: String) -> ConstValue? {
                    guard let r = st.inputs.first(where: { $0.name == name })?.refs, r.count == 1 else { return nil }
                    return constValue(r[0])
                }
                func param(_ name: String) -> Float? {
                    guard let d = constant(name)?.doubles(), d.count == 1 else { return nil }
                    return Float(d[0])
                }
                func ints(_ name: String) -> [Int]? { constant(name)?.ints() }
                func has(_ name: String) -> Bool { st.inputs.contains { $0.name == name } }
                /// ``EW/epsilon``: the op's epsilon, else the MIL default in the dtype of x.
                func epsilon(_ d: Float) -> Float? {
                    if has("epsilon") { return param("epsilon") }
                    return EW.defaultEpsilon(d, dtype: operandType(st, "x")?.dtype ?? .fp32)
                }
                let type = st.op.type
                var a: Arg, aw: Int
                var b: Arg?
                var rest: [Arg] = []
                let code: Code
                if type == "concat" {
                    // Along the last axis, not interleaved: the rows one after another.
                    guard let ax = ints("axis"), ax.count == 1, ax[0] == -1 || ax[0] == rank - 1,
                          !has("interleave") || ints("interleave") == [0],
                          let refs = local.inputs.first(where: { $0.name == "values" })?.refs, refs.count >= 2,
                          let operands = st.op.input("values")?.operands, operands.count == refs.count else { return nil }
                    var args: [(Arg, Int)] = []
                    for (r, o) in zip(refs, operands) {
                        // concat does not broadcast ranks either: an outside operand of another
                        // rank (a vector [D] beside [1, 1, D]) is the op's error, not a row.
                        if case .external = r, o.type.tensorType?.shape.count != rank { return nil }
                        guard let x = arg(r, o.type.tensorType) else { return nil }
                        args.append(x)
                    }
                    guard args.reduce(0, { $0 + $1.1 }) == width else { return nil }
                    // Every operand a full row of its width (not one value broadcast).
                    for (x, w) in args { if case .external = x, w == 1 { return nil } }
                    (a, aw) = args[0]
                    rest = args.dropFirst().map(\.0)
                    code = .concat
                } else {
                    guard let x = arg("x") else { return nil }
                    (a, aw) = x
                    switch type {
                    case let t where plain[t] != nil:
                        code = plain[t]!
                        if code.isBinary {
                            guard let y = arg("y"), y.1 == width || y.1 == 1, max(aw, y.1) == width else { return nil }
                            b = y.0
                        }
                    case "rsqrt": guard let e = epsilon(EW.rsqrtEpsilon) else { return nil }; code = .rsqrt(e)
                    case "inverse": guard let e = epsilon(EW.inverseEpsilon) else { return nil }; code = .inverse(e)
                    case "clip":
                        guard let lo = param("alpha"), let hi = param("beta") else { return nil }
                        code = .clip(lo, hi)
                    case "slice_by_index":
                        // x of the region's rank (begin / end have one value an axis of it).
                        guard operandType(st, "x")?.shape.count == rank,
                              let start = lastAxisSlice(st, rank: rank, inputWidth: aw, width: width) else { return nil }
                        code = .slice(start)
                    case let t:
                        guard let mode = reductions[t], width == 1, let ax = ints("axes"), ax.count == 1, ax[0] == -1 || ax[0] == rank - 1,
                              ints("keep_dims") == [1] else { return nil }
                        code = .reduce(mode)
                    }
                    // Elementwise: the output is as wide as its widest operand (a declared width
                    // beyond every operand's would size the scratch from the type alone), the
                    // others a row of that width or one value a row.
                    switch code {
                    case .reduce, .slice: break
                    default:
                        guard aw == width || aw == 1 else { return nil }
                        if b == nil { guard aw == width else { return nil } }
                    }
                }
                let out = local.outputs[0]
                widths[out] = width
                let operands = [a] + (b.map { [$0] } ?? []) + rest
                sources[out] = operands.reduce(into: Set<Int>()) { $0.formUnion(sourcesOf($1)) }
                if case .concat = code { concatOperandSources.append(operands.map { sourcesOf($0).sorted() }) }
                instructions.append(Instruction(code: code, a: a, b: b, rest: rest, out: out, width: width))
            }
            guard let dt = plan.steps[order.last!].op.outputs[0].type.tensorType?.dtype else { return nil }
            let dataExternals = externalWidths.indices.filter { externalWidths[$0] > 0 }
            return Program(instructions: instructions, widths: widths, externalWidths: externalWidths,
                           width: max(1, widths.max() ?? 1), rank: rank, outputDType: dt, dataExternals: dataExternals,
                           concatOperandSources: concatOperandSources)
        }

        /// The start of a `slice_by_index` that keeps every axis but the last whole and takes
        /// `width` consecutive values of the last (of `inputWidth`), or nil. Resolved as the
        /// kernel resolves it (``SliceRegion``: negative indices, masks).
        func lastAxisSlice(_ st: ExecutionPlan.Step, rank: Int, inputWidth: Int, width: Int) -> Int? {
            func values(_ name: String) -> [Int]? {
                guard let r = st.inputs.first(where: { $0.name == name })?.refs, r.count == 1 else { return nil }
                return constValue(r[0])?.ints()
            }
            func flags(_ name: String) -> [Bool]? {
                guard st.inputs.contains(where: { $0.name == name }) else { return [Bool](repeating: false, count: rank) }
                return values(name)?.map { $0 != 0 }
            }
            guard let begin = values("begin"), let end = values("end"), begin.count == rank, end.count == rank,
                  let bm = flags("begin_mask"), let em = flags("end_mask"), let sm = flags("squeeze_mask"),
                  bm.count == rank, em.count == rank, sm.count == rank else { return nil }
            let stride = st.inputs.contains(where: { $0.name == "stride" }) ? values("stride") : [Int](repeating: 1, count: rank)
            guard let stride, stride.count == rank, stride.allSatisfy({ $0 == 1 }), !sm.contains(true) else { return nil }
            // Leading axes whole: from 0 (or masked) to the end (masked).
            for k in 0..<(rank - 1) where !((bm[k] || begin[k] == 0) && em[k]) { return nil }
            guard let r = try? SliceRegion(shape: [inputWidth], begin: [begin[rank - 1]], end: [end[rank - 1]], stride: [1],
                                           beginMask: [bm[rank - 1]], endMask: [em[rank - 1]], squeezeMask: [false]),
                  r.lengths == [width], r.steps == [1] else { return nil }
            return r.starts[0]
        }

        /// The declared type of a step's operand `name` (nil when not one tensor).
        func operandType(_ st: ExecutionPlan.Step, _ name: String) -> TensorType? {
            guard let v = st.op.input(name)?.operands, v.count == 1 else { return nil }
            return v[0].type.tensorType
        }
    }
}

extension ExecutionPlan {
    /// ``RowwiseFusion`` on (default); `FORGE_ROWWISE_FUSION=0` turns it off (for A/B
    /// measurements and for checking that fused and unfused runs agree).
    static let rowwiseFusion = ProcessInfo.processInfo.environment["FORGE_ROWWISE_FUSION"] != "0"
}
