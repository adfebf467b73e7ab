import GraphIR

/// Execution-level fusion of attention over a KV cache (never written back). Two forms of the
/// computation are recognised, whatever the converter's op order around them:
///
/// ```
/// o = scaled_dot_product_attention(query = q, key = K, value = V, attn_mask = mask?)
///
/// s = matmul(x = q, y = K, transpose_y = true)   // or transpose_y = false on K [1, H, D, T]
/// s = mul(s, c) | real_div(s, c)                  // optional, c a scalar constant
/// s = add(s, mask)                                // optional, either order
/// o = matmul(x = softmax(s, axis = -1), y = V)
/// ```
/// where `K` / `V` are any data-movement chain (``LayoutStep/ops``: `expand_dims`, `tile`,
/// `reshape`, `transpose`, `squeeze`, `slice_by_index`) over a buffer — a `read_state` of a
/// per-layer `[1, KV, CTX, D]` or stacked `[L, 1, KV, CTX, D]` cache, or any tensor — that
/// comes out, at run time, as a strided view with query head `h` reading KV head `h / rep`
/// (``LayoutView``). It becomes one kernel (`fk_attention`) reading the buffer in place: no
/// tiled copy, no widened copy of the cache, key columns whose additive mask is ≤ −1e4
/// skipped (their softmax weight, exp(score − 1e4 − max), is exactly 0 in fp32 for any score
/// below ~9900 in magnitude). When every column of a row is masked, the row attends over all
/// columns with mask > −inf, as the graph's softmax does; a NaN mask value is never skipped,
/// and a row left without columns (all −inf mask) is NaN. Runs only in `fp32` precision.
///
/// A chain whose run-time parameters do not make such a view (a `tile` that maps head `h` to
/// `h % KV`, a slice of a repeated axis, …) runs the original ops instead (``FusedFallback``),
/// and `--profile` says why. The `read_state` is looked through only when no op between it
/// and the attention can change the state; it is dropped when nothing else reads it.
enum AttentionFusion {
    static let maskedThreshold: Float = -1e4
    /// The fused step's first input name (how plan code recognises a fused attention).
    static let queryName = "fused_attention.query"
    /// The first input name of a `shape` answered from a fused chain.
    static let shapeSourceName = "fused_attention.shape_source"

    /// A fused attention step.
    static func isFused(_ st: ExecutionPlan.Step) -> Bool { st.inputs.first?.name == queryName }
    /// A step made by this fusion that reads a state without changing it (the attention, or a
    /// `shape` of its chain).
    static func readsInPlace(_ st: ExecutionPlan.Step) -> Bool {
        st.inputs.first.map { $0.name == queryName || $0.name == shapeSourceName } ?? false
    }

    /// A K or V operand at plan time.
    struct Operand {
        /// The buffer: a state read in place, or a tensor.
        let source: ExecutionPlan.Ref
        /// Data-movement steps from the buffer to the operand: (op type, parameter refs).
        let chain: [(op: String, params: [(name: String, ref: ExecutionPlan.Ref)])]
        /// Steps the fusion removes from the plan, and the steps its fallback re-runs.
        let removed: [Int]
        let fallback: [Int]
        /// `shape` ops reading a value of the chain (Apple's recipe computes the `tile` reps and
        /// the mask slice from them): (step, number of chain steps that make the value). They
        /// are answered from the buffer's shape and the chain's parameters.
        let shapeUsers: [(step: Int, prefix: Int)]
        /// The operand is `[1, H, D, T]` (matmul with transpose_y = false).
        var transposed = false
    }

    /// A recognised attention at plan time.
    struct Match {
        let kind: String
        let q: ExecutionPlan.Ref
        let k: Operand, v: Operand
        let mask: ExecutionPlan.Ref?
        /// nil: 1/√D (`scaled_dot_product_attention`).
        let scale: Float?
        /// The anchor-side steps (softmax chain, or the op itself), the last one the output op.
        let removed: [Int]
    }

    /// Rewrites `plan`'s steps in place and returns every candidate site (fused, or why not).
    /// `useCount` counts reads of each slot; a match whose removed steps produce a `protected`
    /// slot (an observed value) is left unfused.
    /// With `refuse` set, nothing is rewritten: every candidate is reported with that reason
    /// (`fp16` precision keeps the per-op rounding).
    static func apply(_ plan: ExecutionPlan.BlockPlan, useCount: [Int: Int], protected: Set<Int> = [],
                      constant: @escaping (Int) -> ConstValue? = { _ in nil }, refuse: String? = nil) -> [FusionSite] {
        let m = Matcher(plan: plan, useCount: useCount, constant: constant)
        var sites: [FusionSite] = []
        var remove = Set<Int>()
        var replace: [Int: ExecutionPlan.Step] = [:]
        for (i, st) in plan.steps.enumerated() {
            let kind: String
            let result: Result<Match, Matcher.NoMatch>
            if st.op.type == "scaled_dot_product_attention" {
                kind = st.op.type
                result = m.sdpa(i)
            } else if st.op.type == "matmul", let x = m.slot(st, "x"), let p = m.producer[x], plan.steps[p].op.type == "softmax" {
                kind = "attention"
                result = m.softmaxChain(i)
            } else { continue }
            if let refuse {
                sites.append(FusionSite(kind: kind, op: st.op.name, reason: refuse))
                continue
            }
            switch result {
            case let .failure(f):
                sites.append(FusionSite(kind: kind, op: st.op.name, reason: f.reason))
            case let .success(match):
                let all = Set(match.removed + match.k.removed + match.v.removed)
                if !protected.isEmpty, all.contains(where: { plan.steps[$0].outputSlots.contains(where: protected.contains) }) {
                    sites.append(FusionSite(kind: kind, op: st.op.name, reason: "an intermediate value is observed"))
                    continue
                }
                let site = FusionSite(kind: kind, op: st.op.name, reason: nil)
                guard let fused = fusedStep(match, anchor: st, plan: plan, site: site),
                      let shapes = shapeSteps(match, plan: plan, site: site) else {
                    sites.append(FusionSite(kind: kind, op: st.op.name, reason: "an op of the chain has no kernel"))
                    continue
                }
                sites.append(site)
                replace[i] = fused
                for (j, step) in shapes { replace[j] = step }
                for r in all where r != i { remove.insert(r) }
            }
        }
        if !replace.isEmpty {
            plan.steps = plan.steps.enumerated().compactMap { i, st in
                if remove.contains(i) { return nil }
                return replace[i] ?? st
            }
        }
        return sites
    }

    /// The fused step of `match`: its operands are the fallback's externals, led by the query,
    /// the K and V buffers, the mask and the chains' parameters.
    static func fusedStep(_ match: Match, anchor: ExecutionPlan.Step, plan: ExecutionPlan.BlockPlan,
                          site: FusionSite) -> ExecutionPlan.Step? {
        var leading: [ExecutionPlan.Ref] = [match.q, match.k.source, match.v.source]
        if let mask = match.mask { leading.append(mask) }
        func chain(_ o: Operand) -> [LayoutStep] {
            o.chain.map { c in
                LayoutStep(op: c.op, params: c.params.map { p in
                    leading.append(p.ref)
                    return (name: p.name, index: leading.count - 1)
                })
            }
        }
        let kChain = chain(match.k), vChain = chain(match.v)
        let order = Set(match.removed + match.k.fallback + match.v.fallback).sorted()
        guard let fallback = FusedFallback(order.map { plan.steps[$0] }, leading: leading) else { return nil }
        let spec = Runtime(kind: match.kind, scale: match.scale, hasMask: match.mask != nil,
                           k: .init(chain: kChain, transposed: match.k.transposed),
                           v: .init(chain: vChain, transposed: match.v.transposed),
                           fallback: fallback, site: site)
        let inputs = fallback.externals.enumerated().map { i, r in (name: i == 0 ? queryName : "e\(i)", refs: [r]) }
        return ExecutionPlan.Step(op: anchor.op, kernel: spec.kernel, inputs: inputs, outputSlots: anchor.outputSlots,
                                  release: [], isConstant: false, blocks: [])
    }

    /// The `shape` ops of K's and V's chains, answered without the chain's data: the view's
    /// shape over the buffer's shape (the original ops when the view does not apply).
    static func shapeSteps(_ match: Match, plan: ExecutionPlan.BlockPlan, site: FusionSite) -> [Int: ExecutionPlan.Step]? {
        var out: [Int: ExecutionPlan.Step] = [:]
        for o in [match.k, match.v] {
            for (j, prefix) in o.shapeUsers {
                var leading: [ExecutionPlan.Ref] = [o.source]
                let chain = o.chain.prefix(prefix).map { c in
                    LayoutStep(op: c.op, params: c.params.map { p in
                        leading.append(p.ref)
                        return (name: p.name, index: leading.count - 1)
                    })
                }
                // The fallback: the read_state (if any), the chain steps that make the value, the shape.
                let steps = o.fallback.sorted()
                let reads = steps.filter { plan.steps[$0].op.type == "read_state" }
                let made = steps.filter { plan.steps[$0].op.type != "read_state" }.prefix(prefix)
                guard let fallback = FusedFallback((reads + made + [j]).map { plan.steps[$0] }, leading: leading) else { return nil }
                let shapeOp = plan.steps[j]
                let kernel: Kernel = { inv in
                    do {
                        let buffer = try KV(inv.flat[0])
                        var view = LayoutView(shape: buffer.shape)
                        for st in chain {
                            try st.apply(to: &view) { name in
                                guard let p = st.params.first(where: { $0.name == name }) else { return nil }
                                return try inv.flat[p.index].dense()
                            }
                        }
                        return [.tensor(Tensor(.int32, shape: [view.axes.count], ints: view.shape.map { Int32($0) }))]
                    } catch let m as LayoutView.Mismatch {
                        site.fallbacks["shape: " + m.reason, default: 0] += 1
                        return [try fallback.run(inv.flat, precision: inv.precision, activations: inv.activations)]
                    }
                }
                let inputs = fallback.externals.enumerated().map { i, r in (name: i == 0 ? shapeSourceName : "e\(i)", refs: [r]) }
                out[j] = ExecutionPlan.Step(op: shapeOp.op, kernel: kernel, inputs: inputs, outputSlots: shapeOp.outputSlots,
                                            release: [], isConstant: false, blocks: [])
            }
        }
        return out
    }
}

extension AttentionFusion {
    /// Plan-time pattern queries over one block.
    struct Matcher {
        let plan: ExecutionPlan.BlockPlan
        let useCount: [Int: Int]
        let constant: (Int) -> ConstValue?
        let producer: [Int: Int]
        /// The steps of this block reading each slot.
        let readers: [Int: [Int]]

        struct NoMatch: Error { let reason: String }
        static func attempt<T>(_ body: () throws -> T) -> Result<T, NoMatch> {
            do { return .success(try body()) } catch let e as NoMatch { return .failure(e) } catch { return .failure(NoMatch(reason: "\(error)")) }
        }

        init(plan: ExecutionPlan.BlockPlan, useCount: [Int: Int], constant: @escaping (Int) -> ConstValue?) {
            self.plan = plan
            self.useCount = useCount
            self.constant = constant
            var p: [Int: Int] = [:], r: [Int: [Int]] = [:]
            for (i, st) in plan.steps.enumerated() {
                for s in st.outputSlots { p[s] = i }
                for (_, refs) in st.inputs { for ref in refs { if case let .slot(s) = ref, r[s]?.last != i { r[s, default: []].append(i) } } }
            }
            producer = p
            readers = r
        }

        /// The `shape` ops reading `s` when every other reader is `user` (nil when another op,
        /// a nested block or a block output reads it).
        func shapeReaders(_ s: Int, besides user: Int) -> [Int]? {
            let rs = readers[s] ?? []
            let n = rs.reduce(0) { n, i in n + plan.steps[i].inputs.reduce(0) { $0 + $1.refs.filter { if case let .slot(x) = $0 { return x == s } else { return false } }.count } }
            guard n == useCount[s], rs.contains(user) else { return nil }
            let others = rs.filter { $0 != user }
            guard others.allSatisfy({ plan.steps[$0].op.type == "shape" }) else { return nil }
            return others
        }

        func ref(_ st: ExecutionPlan.Step, _ name: String) -> ExecutionPlan.Ref? {
            guard let r = st.inputs.first(where: { $0.name == name })?.refs, r.count == 1 else { return nil }
            return r[0]
        }

        func slot(_ st: ExecutionPlan.Step, _ name: String) -> Int? {
            guard case let .slot(s)? = ref(st, name) else { return nil }
            return s
        }

        /// The value of a constant operand (an operand constant or a `const` op's output).
        func constValue(_ r: ExecutionPlan.Ref?) -> ConstValue? {
            switch r {
            case let .constant(i)?: return constant(i)
            case let .slot(s)?:
                guard let i = producer[s], plan.steps[i].op.type == "const" else { return nil }
                return plan.steps[i].op.constValue
            case nil: return nil
            }
        }

        func constBool(_ st: ExecutionPlan.Step, _ name: String) -> Bool? {
            guard st.inputs.contains(where: { $0.name == name }) else { return false }
            guard let v = constValue(ref(st, name))?.ints(), v.count == 1 else { return nil }
            return v[0] != 0
        }

        /// The step producing `s` when only one op reads `s` (else the reason).
        func single(_ s: Int?, _ what: String) throws -> (Int, ExecutionPlan.Step) {
            guard let s, let i = producer[s] else { throw NoMatch(reason: "\(what) is not computed in this block") }
            guard useCount[s] == 1 else { throw NoMatch(reason: "\(what) (\(plan.steps[i].op.type)) has a second user") }
            return (i, plan.steps[i])
        }

        func sdpa(_ i: Int) -> Result<Match, NoMatch> {
            Matcher.attempt {
                let st = plan.steps[i]
                if let extra = st.inputs.first(where: { !["query", "key", "value", "attn_mask"].contains($0.name) }) {
                    throw NoMatch(reason: "input '\(extra.name)' is not supported")
                }
                guard let q = ref(st, "query"), let k = slot(st, "key"), let v = slot(st, "value") else {
                    throw NoMatch(reason: "query / key / value are not single values")
                }
                return Match(kind: st.op.type, q: q, k: try operand(k, user: i, anchor: i), v: try operand(v, user: i, anchor: i),
                             mask: ref(st, "attn_mask"), scale: nil, removed: [i])
            }
        }

        func softmaxChain(_ i2: Int) -> Result<Match, NoMatch> {
            Matcher.attempt {
                let m2 = plan.steps[i2]
                guard constBool(m2, "transpose_x") == false, constBool(m2, "transpose_y") == false else {
                    throw NoMatch(reason: "the value matmul transposes")
                }
                let (ip, sm) = try single(slot(m2, "x"), "the softmax output")
                let axis = constValue(ref(sm, "axis"))?.ints() ?? [-1]
                guard axis == [-1] || axis == [3] else { throw NoMatch(reason: "softmax is not over the last axis") }
                var removed = [ip, i2]
                var (ix, x) = try single(slot(sm, "x"), "the scores")
                var mask: ExecutionPlan.Ref?
                if x.op.type == "add" {
                    // add(scores, mask) in either order: the scores side is the matmul chain.
                    func isScores(_ s: Int?) -> Bool {
                        guard let s, let p = producer[s] else { return false }
                        return ["matmul", "mul", "real_div"].contains(plan.steps[p].op.type)
                    }
                    let (a, b) = (slot(x, "x"), slot(x, "y"))
                    let scoresFirst = isScores(a)
                    guard scoresFirst || isScores(b) else { throw NoMatch(reason: "the mask add has no matmul side") }
                    mask = scoresFirst ? ref(x, "y") : ref(x, "x")
                    removed.append(ix)
                    (ix, x) = try single(scoresFirst ? a : b, "the scaled scores")
                }
                var scale: Float = 1
                if x.op.type == "mul" || x.op.type == "real_div" {
                    let (a, b) = (ref(x, "x"), ref(x, "y"))
                    let cIsY = scalar(b) != nil
                    guard let c = cIsY ? scalar(b) : (x.op.type == "mul" ? scalar(a) : nil) else {
                        throw NoMatch(reason: "the score scale is not a scalar constant")
                    }
                    scale = x.op.type == "mul" ? c : 1 / c
                    removed.append(ix)
                    guard case let .slot(s)? = cIsY ? a : b else { throw NoMatch(reason: "the scaled value is a constant") }
                    (ix, x) = try single(s, "the raw scores")
                }
                guard x.op.type == "matmul", constBool(x, "transpose_x") == false, let ty = constBool(x, "transpose_y") else {
                    throw NoMatch(reason: "the scores are not matmul(q, k) (\(x.op.type))")
                }
                removed.append(ix)
                guard let q = ref(x, "x"), let k = slot(x, "y"), let v = slot(m2, "y") else {
                    throw NoMatch(reason: "query / key / value are not single values")
                }
                var kop = try operand(k, user: ix, anchor: i2)
                kop.transposed = !ty
                return Match(kind: "attention", q: q, k: kop, v: try operand(v, user: i2, anchor: i2), mask: mask, scale: scale,
                             removed: removed.sorted())
            }
        }

        func scalar(_ r: ExecutionPlan.Ref?) -> Float? {
            guard let c = constValue(r), c.ints() == nil || c.type.tensorType?.dtype.isFloat == true,
                  let d = c.doubles(), d.count == 1 else { return nil }
            return Float(d[0])
        }

        /// K or V: data-movement steps back from `s` while only they read their inputs, down
        /// to a buffer; a `read_state` buffer is read in place when no op between it and
        /// `anchor` can change the state.
        func operand(_ s0: Int, user consumer: Int, anchor: Int) throws -> Operand {
            var s = s0
            var user = consumer
            var chain: [(op: String, params: [(name: String, ref: ExecutionPlan.Ref)])] = []
            var removed: [Int] = []
            var shapes: [(step: Int, depth: Int)] = []
            while let i = producer[s], LayoutStep.ops.contains(plan.steps[i].op.type), let x = slot(plan.steps[i], "x"),
                  let sh = shapeReaders(s, besides: user) {
                let st = plan.steps[i]
                let params = st.inputs.filter { $0.name != "x" && $0.refs.count == 1 }.map { (name: $0.name, ref: $0.refs[0]) }
                for j in sh { shapes.append((step: j, depth: chain.count)) }
                chain.insert((op: st.op.type, params: params), at: 0)
                removed.append(i)
                user = i
                s = x
            }
            let shapeUsers = shapes.map { (step: $0.step, prefix: chain.count - $0.depth) }
            var fallback = removed
            if let i = producer[s], plan.steps[i].op.type == "read_state", let state = slot(plan.steps[i], "input"),
               !StateUpdateFusion.changes(state, in: plan.steps[(i + 1)..<anchor]) {
                fallback.append(i)
                if useCount[s] == 1 { removed.append(i) }
                return Operand(source: .slot(state), chain: chain, removed: removed, fallback: fallback, shapeUsers: shapeUsers)
            }
            return Operand(source: .slot(s), chain: chain, removed: removed, fallback: fallback, shapeUsers: shapeUsers)
        }
    }
}
