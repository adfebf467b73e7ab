import GraphIR

/// Execution-level fusion of an explicit KV cache (pre-iOS 18 exports: the cache is a function
/// input `X` [L, …], the updated cache an output `Y` of the same shape, no states), never
/// written back to a model:
///
/// ```
/// p_l = slice_by_index(x = X, layer l)          // or gather(x = X, indices = l, axis = 0)
/// w_l = scatter(data = p_l, indices, updates)   // or slice_update(x = p_l, update, …)
/// …   = attention reading w_l                   // fused by AttentionFusion
/// Y   = stack(values = (w_0, …, w_{L−1}), axis = 0)   // or concat(…, axis = 0) of unsqueezed picks
/// ```
/// When the caller carries `Y` back as the next call's `X` (the plan is built with
/// `carrying: [X: Y]`, as ``Generation/Generator`` does for an explicit-cache contract), `X`
/// lives in a buffer across calls (a state in all but name, ``StateBuffer``, fp32 storage) and
/// this runs as: each write stores only its new rows into layer l of that buffer in place, the
/// attention reads layer l as a view of it (``StateBuffer/init(view:offset:shape:)``), and the
/// `stack` becomes a step that rounds the rows written by this call to the output's fp16 (the
/// rounding `Y` had as an fp16 output, and `X` as an fp16 input, in the unfused graph). No
/// slice, scatter, stack or output copy of the cache is left: per call the graph copied each
/// cache three times (slice, scatter, stack) and rounded it once more as an output.
///
/// Valid, and applied, only when: `X` is read only by the L picks, one per layer, each pick is
/// read only by its write, each write's result only by fused attention steps (as their K / V
/// buffer) that run before the `stack` and by the `stack` itself, the `stack` takes every
/// layer in order and is read only as the output `Y`, no removed value is observed, and the
/// precision is `fp32` (fp16 precision fuses no attention). Results are then bit-identical to
/// the unfused graph: the attention reads this call's rows unrounded (as the graph's fp32
/// intermediates), the older rows were rounded when their call ended, as the output was.
///
/// The chained form (the cache updated on the input itself, layer after layer) is fused too:
/// ```
/// w_0 = slice_update(x = X, update, begin = [0, …, pos, …])     // or scatter(data = X, …)
/// w_k = slice_update(x = w_{k−1}, …)   …   Y = w_last
/// …   = attention reading slice_by_index(w_k, layer l)           // fused by AttentionFusion
/// ```
/// (see ``chain(_:function:xSlot:y:output:shape:protected:roundHalf:)`` for its conditions).
enum CarriedCacheFusion {
    struct NoMatch: Error { let reason: String }

    /// The rows one call wrote into a carried buffer (element runs), rounded by the merge step.
    final class Written {
        var runs: [(offset: Int, count: Int)] = []
    }

    /// Rewrites `plan` (the function's top-level block) for each pair of `carrying` (input name
    /// → output name) that matches; returns every candidate site (`carried_cache`, one a pair,
    /// and `state_write`, one a fused layer write) and the fused pairs.
    static func apply(_ plan: ExecutionPlan.BlockPlan, function: Function, inputSlots: [Int], carrying: [String: String],
                      useCount: [Int: Int], protected: Set<Int>, constant: @escaping (Int) -> ConstValue?,
                      precision: Precision) -> (sites: [FusionSite], fused: [String: String]) {
        var sites: [FusionSite] = []
        var fused: [String: String] = [:]
        for (input, output) in carrying.sorted(by: { $0.key < $1.key }) {
            let m = AttentionFusion.Matcher(plan: plan, useCount: useCount, constant: constant)
            let result: Result<Match, NoMatch>
            do {
                guard precision == .fp32 else { throw NoMatch(reason: "fp16 precision keeps the per-op rounding") }
                result = .success(try match(m, function: function, inputSlots: inputSlots, input: input, output: output,
                                            protected: protected))
            } catch let e as NoMatch {
                result = .failure(e)
            } catch {
                result = .failure(NoMatch(reason: "\(error)"))
            }
            switch result {
            case let .failure(f):
                sites.append(FusionSite(kind: "carried_cache", op: input, reason: f.reason))
            case let .success(match):
                let pairSite = FusionSite(kind: "carried_cache", op: input, reason: nil)
                sites.append(pairSite)
                sites += rewrite(plan, match, site: pairSite)
                fused[input] = output
            }
        }
        return (sites, fused)
    }

    /// A matched pair at plan time.
    struct Match {
        let xSlot: Int
        /// The cache shape [L, …] and the elements of one layer.
        let shape: [Int]
        let layerCount: Int
        /// The writes: step, data input name, and the part of the buffer they update (element
        /// offset, shape: a layer, or the whole cache in the chained form).
        let writes: [(step: Int, dataName: String, offset: Int, shape: [Int])]
        /// Steps removed (the layer picks).
        let removed: [Int]
        /// Where the rounding step goes: in place of step `finishAt` (the merge), or right
        /// after it (the chained form) when `insertAfter`.
        let finishAt: Int
        let insertAfter: Bool
        /// Round the written rows to fp16 at the merge (the output or the input is fp16).
        let roundHalf: Bool
    }

    static func match(_ m: AttentionFusion.Matcher, function: Function, inputSlots: [Int], input: String, output: String,
                      protected: Set<Int>) throws -> Match {
        let plan = m.plan
        let useCount = m.useCount
        guard let xi = function.inputs.firstIndex(where: { $0.name == input }), xi < inputSlots.count else {
            throw NoMatch(reason: "no input '\(input)'")
        }
        guard let yi = function.outputs.firstIndex(where: { $0.name == output }), yi < plan.outputRefs.count,
              case let .slot(y) = plan.outputRefs[yi] else { throw NoMatch(reason: "no output '\(output)' computed here") }
        let xv = function.inputs[xi]
        guard let xt = xv.type.tensorType, xt.dtype == .fp16 || xt.dtype == .fp32, let shape = xt.fixedShape, shape.count >= 1,
              shape[0] >= 1, let total = CheckedSize.elementCount(shape) else {
            throw NoMatch(reason: "'\(input)' is not a float tensor of static shape")
        }
        let xSlot = inputSlots[xi]
        let layers = shape[0], layerCount = total / layers
        guard let im = m.producer[y] else { throw NoMatch(reason: "'\(output)' is not computed in the function's block") }
        let merge = plan.steps[im]
        if ["slice_update", "scatter", "scatter_nd"].contains(merge.op.type) {
            return try chain(m, function: function, xSlot: xSlot, y: y, output: output, shape: shape, protected: protected,
                             roundHalf: xt.dtype == .fp16 || function.outputs[yi].type.tensorType?.dtype == .fp16)
        }
        guard (useCount[y] ?? 0) == 1 else { throw NoMatch(reason: "'\(output)' is read by an op of the graph too") }
        let mergeAxis = m.constValue(m.ref(merge, "axis"))?.ints()
        let stacked: Bool
        switch merge.op.type {
        case "stack": stacked = true
        case "concat":
            stacked = false
            if let il = m.constBool(merge, "interleave"), il { throw NoMatch(reason: "'\(output)' is an interleaved concat") }
        default: throw NoMatch(reason: "'\(output)' is made by \(merge.op.type), not stack / concat of the layers or a chain of updates")
        }
        guard let axis = mergeAxis, axis.count == 1, axis[0] == 0 || axis[0] == -shape.count else {
            throw NoMatch(reason: "the \(merge.op.type) is not over axis 0")
        }
        guard let values = merge.inputs.first(where: { $0.name == "values" })?.refs, values.count == layers else {
            throw NoMatch(reason: "the \(merge.op.type) does not take one value per layer (\(layers))")
        }
        var out: [(step: Int, dataName: String, offset: Int, shape: [Int])] = []
        var picks: [Int] = []
        var removedSlots: [Int] = [y]
        for (l, ref) in values.enumerated() {
            guard case let .slot(w) = ref, let iw = m.producer[w] else { throw NoMatch(reason: "layer \(l) of the \(merge.op.type) is not computed here") }
            let write = plan.steps[iw]
            guard let dataName = StateUpdateFusion.updatedInput(of: write.op.type) else {
                throw NoMatch(reason: "layer \(l) is written by \(write.op.type), not scatter / scatter_nd / slice_update")
            }
            guard let p = m.slot(write, dataName), let ip = m.producer[p] else { throw NoMatch(reason: "layer \(l)'s write does not update a layer pick") }
            guard (useCount[p] ?? 0) == 1 else { throw NoMatch(reason: "the pick of layer \(l) has a second user") }
            let pick = plan.steps[ip]
            guard m.slot(pick, "x") == xSlot else { throw NoMatch(reason: "layer \(l)'s write does not update a pick of '\(input)'") }
            let pickShape = try picked(m, pick, layer: l, of: shape)
            let merged = stacked ? [layers] + pickShape : (pickShape.first == 1 ? [layers] + pickShape.dropFirst() : [])
            guard merged == shape else { throw NoMatch(reason: "the \(merge.op.type) of the layer picks \(pickShape) is not \(shape)") }
            // w_l: read only by fused attention steps (as K / V buffer) before the merge, and the merge.
            let (readers, reads) = try attentionReaders(plan, of: w, except: im, what: "layer \(l)'s updated cache")
            guard reads == (useCount[w] ?? 0) else { throw NoMatch(reason: "layer \(l)'s updated cache is read in a nested block") }
            for i in readers where i != im {
                guard i < im, i > iw else { throw NoMatch(reason: "layer \(l)'s updated cache is read after the \(merge.op.type)") }
            }
            guard values.filter({ isSlot($0, w) }).count == 1 else { throw NoMatch(reason: "layer \(l) is stacked twice") }
            removedSlots += [p, w]
            out.append((step: iw, dataName: dataName, offset: l * layerCount, shape: pickShape))
            picks.append(ip)
        }
        guard (useCount[xSlot] ?? 0) == layers else {
            throw NoMatch(reason: "'\(input)' is read by ops other than its \(layers) layer picks")
        }
        if !protected.isEmpty, removedSlots.contains(where: protected.contains) {
            throw NoMatch(reason: "an intermediate value is observed")
        }
        let outDType = function.outputs[yi].type.tensorType?.dtype
        return Match(xSlot: xSlot, shape: shape, layerCount: layerCount, writes: out, removed: picks, finishAt: im, insertAfter: false,
                     roundHalf: xt.dtype == .fp16 || outDType == .fp16)
    }

    /// The chained form (a cache updated in place on the input, as `cache[l, …, pos] = k` traces):
    /// `w_0 = slice_update(X, …)` (or `scatter`), `w_k = slice_update(w_{k−1}, …)`, …, `Y = w_last`,
    /// each `w_k` read only by the next update, by fused attention steps (as their K / V buffer,
    /// through any view chain such as `slice_by_index(w_k, layer l)`) that run before the next
    /// update, and `Y` only as the output and by such steps. Each update then writes its rows
    /// into the whole carried buffer in place; the rounding step goes after the last reader.
    static func chain(_ m: AttentionFusion.Matcher, function: Function, xSlot: Int, y: Int, output: String, shape: [Int],
                      protected: Set<Int>, roundHalf: Bool) throws -> Match {
        let plan = m.plan
        var updates: [(step: Int, dataName: String)] = []
        var cur = y
        while true {
            guard let i = m.producer[cur], updates.count <= plan.steps.count else { throw NoMatch(reason: "'\(output)' is not a chain of updates of the input") }
            let st = plan.steps[i]
            guard let dataName = StateUpdateFusion.updatedInput(of: st.op.type) else {
                throw NoMatch(reason: "the update chain of '\(output)' starts at \(st.op.type), not at the input")
            }
            guard let prev = m.slot(st, dataName) else { throw NoMatch(reason: "an update of '\(output)' updates a constant") }
            updates.append((step: i, dataName: dataName))
            if prev == xSlot { break }
            cur = prev
        }
        updates.reverse()
        guard (m.useCount[xSlot] ?? 0) == 1 else { throw NoMatch(reason: "the input is read by ops other than its first update") }
        var last = updates[updates.count - 1].step
        for (k, u) in updates.enumerated() {
            let w = plan.steps[u.step].outputSlots[0]
            if protected.contains(w) { throw NoMatch(reason: "an intermediate value is observed") }
            let next = k + 1 < updates.count ? updates[k + 1].step : nil
            let (readers, reads) = try attentionReaders(plan, of: w, except: next, what: "update \(k) of '\(output)'")
            guard reads + (next == nil ? 1 : 0) == (m.useCount[w] ?? 0) else {
                throw NoMatch(reason: "update \(k) of '\(output)' is read in a nested block or returned")
            }
            for i in readers where i != next {
                guard i > u.step, next.map({ i < $0 }) ?? true else {
                    throw NoMatch(reason: "update \(k) of '\(output)' is read after the next update")
                }
                last = max(last, i)
            }
            if let next, plan.steps[next].inputs.first(where: { $0.name == updates[k + 1].dataName })?.refs.filter({ isSlot($0, w) }).count != 1 {
                throw NoMatch(reason: "update \(k + 1) of '\(output)' takes update \(k) twice")
            }
        }
        return Match(xSlot: xSlot, shape: shape, layerCount: CheckedSize.elementCount(shape) ?? 0,
                     writes: updates.map { (step: $0.step, dataName: $0.dataName, offset: 0, shape: shape) },
                     removed: [], finishAt: last, insertAfter: true, roundHalf: roundHalf)
    }

    static func isSlot(_ r: ExecutionPlan.Ref, _ s: Int) -> Bool {
        if case let .slot(x) = r { return x == s } else { return false }
    }

    /// The shape `pick` gives when it selects exactly layer `l` of a `[L, …]` cache (axis 0
    /// index `l`, every other axis whole): `slice_by_index` (squeezed or not) or `gather` along
    /// axis 0 with a constant index.
    static func picked(_ m: AttentionFusion.Matcher, _ pick: ExecutionPlan.Step, layer l: Int, of shape: [Int]) throws -> [Int] {
        let rest = Array(shape.dropFirst())
        switch pick.op.type {
        case "slice_by_index":
            func ints(_ n: String) -> [Int]? { m.constValue(m.ref(pick, n))?.ints() }
            func bools(_ n: String) -> [Bool]? { ints(n).map { $0.map { $0 != 0 } } }
            for name in ["begin", "end", "stride", "begin_mask", "end_mask", "squeeze_mask"] where pick.inputs.contains(where: { $0.name == name }) {
                guard ints(name) != nil else { throw NoMatch(reason: "the layer pick's \(name) is not a constant") }
            }
            guard let begin = ints("begin"), let end = ints("end") else { throw NoMatch(reason: "the layer pick has no constant begin / end") }
            let region: SliceRegion
            do {
                region = try SliceRegion(shape: shape, begin: begin, end: end, stride: ints("stride"), beginMask: bools("begin_mask"),
                                         endMask: bools("end_mask"), squeezeMask: bools("squeeze_mask"))
            } catch let e as KernelError { throw NoMatch(reason: "the layer pick: \(e.reason)") }
            guard region.starts[0] == l, region.lengths[0] == 1 else { throw NoMatch(reason: "the pick of layer \(l) selects another layer") }
            for a in 1..<shape.count where !(region.starts[a] == 0 && region.lengths[a] == shape[a] && (region.steps[a] == 1 || shape[a] == 1)) {
                throw NoMatch(reason: "the pick of layer \(l) cuts axis \(a)")
            }
            return region.resultShape
        case "gather":
            guard let idx = m.constValue(m.ref(pick, "indices")), let v = idx.ints(), v == [l] else {
                throw NoMatch(reason: "the gather of layer \(l) has no constant index \(l)")
            }
            let axis = m.constValue(m.ref(pick, "axis"))?.ints() ?? [0]
            let batch = m.constValue(m.ref(pick, "batch_dims"))?.ints() ?? [0]
            guard axis == [0] || axis == [-shape.count], batch == [0] else { throw NoMatch(reason: "the gather of layer \(l) is not along axis 0") }
            return (idx.type.tensorType?.rank ?? 0) == 0 ? rest : [1] + rest
        default:
            throw NoMatch(reason: "the layer is picked by \(pick.op.type), not slice_by_index / gather")
        }
    }

    /// Replaces the picks (removed), the writes (in place into the carried buffer, giving a
    /// view of their layer) and the merge (rounds the rows this call wrote).
    static func rewrite(_ plan: ExecutionPlan.BlockPlan, _ match: Match, site pairSite: FusionSite) -> [FusionSite] {
        var sites: [FusionSite] = []
        var replace: [Int: ExecutionPlan.Step] = [:]
        var remove = Set<Int>()
        let written = Written()
        remove.formUnion(match.removed)
        for layer in match.writes {
            let w = plan.steps[layer.step]
            var inputs = w.inputs.filter { $0.name != layer.dataName }
            inputs.append((name: "state", refs: [.slot(match.xSlot)]))
            let site = FusionSite(kind: "state_write", op: w.op.name, reason: nil)
            sites.append(site)
            let kernel = writeKernel(offset: layer.offset, shape: layer.shape, op: w.op.type,
                                     dense: w.kernel, dataName: layer.dataName, written: written, site: site)
            replace[layer.step] = ExecutionPlan.Step(op: w.op, kernel: kernel, inputs: inputs, outputSlots: w.outputSlots, release: [],
                                                     isConstant: false, blocks: [], fusedStateWrite: true)
        }
        let merge = plan.steps[match.finishAt]
        let roundHalf = match.roundHalf
        let finish: Kernel = { inv in
            guard case let .state(s) = try inv.value("state") else { throw KernelError("carried cache without its buffer") }
            if roundHalf, case let .float(p) = s.storage {
                for r in written.runs where r.offset >= 0 && r.count >= 0 && r.offset <= s.count - r.count {
                    Rounding.toHalf(UnsafeMutableBufferPointer(start: p + r.offset, count: r.count))
                }
            }
            written.runs.removeAll(keepingCapacity: true)
            pairSite.fusedCalls += 1
            return []
        }
        let finishStep = ExecutionPlan.Step(op: merge.op, kernel: finish, inputs: [(name: "state", refs: [.slot(match.xSlot)])],
                                            outputSlots: [], release: [], isConstant: false, blocks: [])
        if !match.insertAfter { replace[match.finishAt] = finishStep }
        var steps: [ExecutionPlan.Step] = []
        for (i, st) in plan.steps.enumerated() where !remove.contains(i) {
            steps.append(replace[i] ?? st)
            if match.insertAfter && i == match.finishAt { steps.append(finishStep) }
        }
        plan.steps = steps
        return sites
    }

    /// The fused write of one layer: the view of elements `offset ..< offset + count(shape)` of
    /// the carried buffer (input `state`) as `shape`, updated in place; returns the view (what
    /// the attention reads). `scatter(mode = update)` and `slice_update` store only their rows;
    /// other scatter modes run the original kernel on a copy of the layer and store it whole.
    /// Every index is checked before the first store.
    static func writeKernel(offset: Int, shape: [Int], op: String, dense: Kernel?, dataName: String,
                            written: Written, site: FusionSite) -> Kernel {
        final class ViewCache { var parent: ObjectIdentifier?; var view: StateBuffer? }
        let cache = ViewCache()
        return { inv in
            guard case let .state(x) = try inv.value("state") else { throw KernelError("fused cache write without its buffer") }
            let view: StateBuffer
            if let v = cache.view, cache.parent == ObjectIdentifier(x) { view = v } else {
                view = try StateBuffer(view: x, offset: offset, shape: shape)
                cache.parent = ObjectIdentifier(x)
                cache.view = view
            }
            let runs: [(src: Int, dst: Int, count: Int)]
            let source: [Float]
            if op == "scatter" || op == "scatter_nd" {
                guard try inv.string("mode", default: "add") == "update" else {
                    guard let dense else { throw KernelError("no scatter kernel") }
                    let r = try dense(inv.replacing(dataName, with: .tensor(view.tensor())))
                    guard r.count == 1 else { throw KernelError("fused cache write: the scatter kernel gave \(r.count) results") }
                    try view.write(try r[0].dense())
                    written.runs.append((offset: offset, count: view.count))
                    site.fusedCalls += 1
                    return [.state(view)]
                }
                (runs, source) = op == "scatter" ? try StateUpdateFusion.scatterRuns(inv, shape: shape) : try scatterNDRuns(inv, shape: shape)
            } else {
                (runs, source) = try sliceUpdateRuns(inv, shape: shape)
            }
            try source.withUnsafeBufferPointer { up in
                for r in runs where r.count > 0 { try view.store(up.baseAddress! + r.src, count: r.count, at: r.dst) }
            }
            for r in runs where r.count > 0 { written.runs.append((offset: offset + r.dst, count: r.count)) }
            site.fusedCalls += 1
            return [.state(view)]
        }
    }

    /// The steps of the top-level block that read slot `w` (in `plan`'s order), each but `except`
    /// (the next write or the merge) checked to be a fused attention reading `w` only as its K / V
    /// buffer, and how many operand reads of `w` they make in all.
    /// - Throws: ``NoMatch`` naming `what` and the step that reads it otherwise.
    static func attentionReaders(_ plan: ExecutionPlan.BlockPlan, of w: Int, except: Int?, what: String) throws -> (readers: [Int], reads: Int) {
        let readers = plan.steps.indices.filter { i in plan.steps[i].inputs.contains { $0.refs.contains { isSlot($0, w) } } }
        let reads = readers.reduce(0) { n, i in n + plan.steps[i].inputs.reduce(0) { $0 + $1.refs.filter { isSlot($0, w) }.count } }
        for i in readers where i != except {
            let st = plan.steps[i]
            guard AttentionFusion.readsInPlace(st) else {
                throw NoMatch(reason: "\(what) is read by \(st.op.type) '\(st.op.name)', not a fused attention")
            }
            let positions = st.inputs.enumerated().filter { $0.element.refs.contains { isSlot($0, w) } }.map(\.offset)
            let allowed: Set<Int> = AttentionFusion.isFused(st) ? [1, 2] : [0]
            guard positions.allSatisfy(allowed.contains) else {
                throw NoMatch(reason: "\(what) is an operand of '\(st.op.name)' other than its K / V buffer")
            }
        }
        return (readers, reads)
    }


    /// `scatter_nd(mode = update)` into a buffer of `shape`: one run of `inner` elements per
    /// index tuple (the unfused kernel's checks: negative indices refused with
    /// `validate_indices`, wrapped otherwise; updates `indices.shape[:-1] + shape[K:]`).
    static func scatterNDRuns(_ inv: KernelInvocation, shape: [Int]) throws -> ([(src: Int, dst: Int, count: Int)], [Float]) {
        let ind = try inv.tensor("indices"), updates = try inv.tensor("updates")
        try IndexKernels.refuseNegative(inv, ind, op: "scatter_nd")
        let (offsets, inner) = try IndexKernels.ndOffsets(shape: shape, indices: ind, batchDims: 0, op: "scatter_nd")
        let k = ind.shape[ind.rank - 1]
        let expected = Array(ind.shape.dropLast()) + Array(shape[k...])
        guard updates.shape == expected else { throw KernelError("scatter_nd: updates shape \(updates.shape), expected \(expected)") }
        return (offsets.enumerated().map { (src: $0.offset * inner, dst: $0.element, count: inner) }, updates.floats)
    }

    /// `slice_update` into a buffer of `shape`: runs of contiguous elements of the region.
    static func sliceUpdateRuns(_ inv: KernelInvocation, shape: [Int]) throws -> ([(src: Int, dst: Int, count: Int)], [Float]) {
        let update = try inv.tensor("update")
        let region = try SliceRegion(inv, shape: shape)
        guard update.count == region.count, update.shape.filter({ $0 != 1 }) == region.resultShape.filter({ $0 != 1 }) else {
            throw KernelError("update has shape \(update.shape), the slice selects \(region.resultShape) of \(shape)")
        }
        let offsets = region.sourceOffsets()
        var runs: [(src: Int, dst: Int, count: Int)] = []
        var i = 0
        while i < offsets.count {
            var e = i + 1
            while e < offsets.count && offsets[e] == offsets[e - 1] + 1 { e += 1 }
            runs.append((src: i, dst: offsets[i], count: e - i))
            i = e
        }
        return (runs, update.floats)
    }
}
