import Foundation
import GraphIR
import Interpreter
import Passes

// MARK: - fp16 overflow

extension RuntimeChecks {
    /// Runs `scenario` in `fp16` precision (every fp16 op output rounded, as on the GPU / Neural
    /// Engine) and reports the first op that *introduces* ±inf or NaN: an output with inf where
    /// no input has inf or NaN, or NaN where no input has NaN. Constant ops are left to the
    /// static `fp16_constant_out_of_range` check.
    ///
    /// - Parameter binding: the flexible-dimension sizes of the scenario's calls, for the finding.
    /// - Throws: `InterpreterError` when the function cannot be planned or a call fails.
    public static func fp16Overflow(function f: Function, scenario: RuntimeScenario, binding: [String: Int]? = nil) throws -> (RuntimeRun, [Finding]) {
        let plan = try ExecutionPlan(function: f, precision: .fp16)
        try scenario.bind(to: plan)
        let states = try freshStates(f)
        let watch = FP16Watch(maskDerived: maskDerivedValues(f))
        plan.observer = { op, results in watch.observe(op, results) }
        let outputsNonFinite = try runUntilOverflow(f, plan: plan, states: states, scenario: scenario, watch: watch)
        let largestText = watch.largest.map { "largest |value| \(format($0.0)) (op '\($0.1.name)', \($0.1.type); additive masks aside)" } ?? "no float values"
        guard let hit = watch.first else {
            let run = RuntimeRun(check: "fp16_overflow", function: f.name, precision: "fp16", inputs: scenario.label, ok: true,
                                 summary: "no op overflows in fp16 (\(watch.watched) op results watched); \(largestText), fp16 max 65504")
            return (run, [])
        }
        return fp16OverflowReport(f, hit: hit, watch: watch, scenario: scenario, outputsNonFinite: outputsNonFinite, binding: binding)
    }

    /// What the fp16 run saw, op by op (filled by the plan's observer).
    final class FP16Watch {
        typealias Operand = (name: String, value: String?, stats: Stats?)
        struct Hit {
            var op: Op
            var call: Int
            var inputs: [Operand]
            var outputs: [Stats]
        }
        var stats: [ObjectIdentifier: Stats] = [:]
        var first: Hit?
        /// Ops whose outputs hold inf/NaN in the failing call.
        var carrying = 0
        var watched = 0
        var largest: (Float, Op)?
        var call = 0
        let maskDerived: Set<ObjectIdentifier>
        init(maskDerived: Set<ObjectIdentifier>) { self.maskDerived = maskDerived }

        func inputStats(_ op: Op) -> [Operand] {
            var out: [Operand] = []
            for input in op.inputs {
                for (j, operand) in input.operands.enumerated() {
                    let label = input.operands.count > 1 ? "\(input.name)[\(j)]" : input.name
                    switch operand {
                    case let .value(v):
                        if v.type.isState { continue }
                        if let s = stats[ObjectIdentifier(v)] {
                            out.append((label, v.name, s))
                        } else if let p = v.producer, p.type == "const", let c = p.constValue {
                            out.append((label, v.name, Stats(c)))
                        } else {
                            out.append((label, v.name, nil))
                        }
                    case let .constant(c):
                        out.append((label, nil, Stats(c)))
                    }
                }
            }
            return out
        }

        func observe(_ op: Op, _ results: [RuntimeValue]) {
            guard results.count == op.outputs.count else { return }
            watched += 1
            var outs: [Stats] = []
            for (v, r) in zip(op.outputs, results) {
                guard let s = Stats(r) else { continue }
                stats[ObjectIdentifier(v)] = s
                outs.append(s)
                if !RuntimeChecks.isConstantOp(op), !maskDerived.contains(ObjectIdentifier(v)), s.maxAbs > (largest?.0 ?? -1) { largest = (s.maxAbs, op) }
            }
            guard outs.contains(where: \.nonFinite) else { return }
            if first != nil { carrying += 1; return }
            guard !RuntimeChecks.isConstantOp(op) else { return }
            let ins = inputStats(op)
            let inInf = ins.contains { ($0.stats?.infs ?? 0) > 0 }, inNaN = ins.contains { ($0.stats?.nans ?? 0) > 0 }
            let outInf = outs.contains { $0.infs > 0 }, outNaN = outs.contains { $0.nans > 0 }
            if (outInf && !inInf && !inNaN) || (outNaN && !inNaN) {
                first = Hit(op: op, call: call, inputs: ins, outputs: outs)
                carrying = 1
            }
        }
    }

    /// Runs the calls in order until one has an op that overflows; returns the outputs of that
    /// call holding inf/NaN.
    static func runUntilOverflow(_ f: Function, plan: ExecutionPlan, states: [String: StateBuffer], scenario: RuntimeScenario, watch: FP16Watch) throws -> [String] {
        var outputsNonFinite: [String] = []
        var previous: [String: Tensor]?
        for i in scenario.calls.indices {
            watch.call = i
            let inputs = scenario.inputs(i, after: previous)
            for v in f.inputs where !v.type.isState {
                if let t = inputs[v.name] { watch.stats[ObjectIdentifier(v)] = Stats(.tensor(t)) }
            }
            let out = try plan.run(inputs: inputs, states: states)
            previous = out
            if watch.first != nil {
                for v in f.outputs { if let t = out[v.name], Stats(.tensor(t))?.nonFinite == true { outputsNonFinite.append(v.name) } }
                break
            }
        }
        return outputsNonFinite
    }

    /// The `fp16_overflow` finding and run for the first op that overflowed.
    static func fp16OverflowReport(_ f: Function, hit: FP16Watch.Hit, watch: FP16Watch, scenario: RuntimeScenario,
                                   outputsNonFinite: [String], binding: [String: Int]?) -> (RuntimeRun, [Finding]) {
        let op = hit.op
        let outInf = hit.outputs.contains { $0.infs > 0 }
        let infs = hit.outputs.reduce(0) { $0 + $1.infs }, negative = hit.outputs.reduce(0) { $0 + $1.negativeInfs }
        let what = outInf ? "overflows to \(negative == 0 ? "+inf" : negative == infs ? "-inf" : "±inf")" : "becomes NaN"
        let bad = hit.outputs.reduce(0) { $0 + $1.infs + $1.nans }, total = hit.outputs.reduce(0) { $0 + $1.count }
        var shapes = hit.inputs.compactMap { i in i.stats.map { ShapeNote(i.name, dtype: $0.dtype, shape: $0.shape) } }
        shapes.append(ShapeNote("output", dtype: hit.outputs.first?.dtype ?? op.outputs.first?.type.tensorType?.dtype, shape: hit.outputs.first?.shape ?? []))
        // mul(x = v, y = v): one entry.
        var seen = Set<String>()
        let inputsText = hit.inputs.compactMap { i -> String? in
            let key = i.value ?? i.name
            guard seen.insert(key).inserted else { return nil }
            let same = hit.inputs.filter { ($0.value ?? $0.name) == key }.map(\.name).joined(separator: " = ")
            return "\(same)\(i.value.map { " ('\($0)')" } ?? "") \(i.stats?.magnitude ?? "?")"
        }.joined(separator: ", ")
        var message = "in fp16 precision the output of \(op.type) '\(op.name)' \(what) (\(bad) of \(total) elements) although its inputs are finite"
        if !outInf { message = "in fp16 precision the output of \(op.type) '\(op.name)' becomes NaN (\(bad) of \(total) elements) although no input is NaN" }
        message += "; inputs max |value|: \(inputsText) (fp16 max 65504)"
        message += "; call \(hit.call + 1) of \(scenario.calls.count) (\(scenario.label)); \(watch.carrying) op result(s) carry inf/NaN in that call"
        message += outputsNonFinite.isEmpty ? ", the outputs stay finite but wrong" : ", outputs with inf/NaN: \(outputsNonFinite.joined(separator: ", "))"
        let (fixPass, fix) = fp16OverflowFix(op, in: f, message: &message)
        let finding = Finding(.error, "fp16_overflow", function: f.name, op: OpIndex(f).ref(op), binding: binding,
                              shapes: shapes, message: message, fixPass: fixPass, fix: fix)
        let run = RuntimeRun(check: "fp16_overflow", function: f.name, precision: "fp16", inputs: scenario.label, ok: false,
                             summary: "\(op.type) '\(op.name)' \(what) first (\(watch.watched) op results watched)")
        return (run, [finding])
    }

    /// The fix for an op that overflows in fp16: the RMSNorm square (fp16_safe_rms_norm, and the
    /// norm's place appended to `message`), another square, or an out-of-range constant
    /// (clamp_fp16_constants); else keeping the op in fp32.
    static func fp16OverflowFix(_ op: Op, in f: Function, message: inout String) -> (pass: String?, fix: String) {
        let uses = UseMap(f)
        if let idiom = RMSNormIdiom.match(square: op, uses: uses) {
            var norms: [Op] = []
            f.body.walk { if NumericChecks.isSquare($0), RMSNormIdiom.match(square: $0, uses: uses) != nil { norms.append($0) } }
            let k = (norms.firstIndex { $0 === op } ?? 0) + 1
            message += ". It is the square of RMSNorm \(k) of \(norms.count) in program order (\(idiom.chain)): the mean becomes inf and rsqrt(inf) = 0 zeroes the normalised row"
            return (FP16SafeRMSNorm.name, "Divide x by its row max|x| before squaring (fp16_safe_rms_norm).")
        }
        if NumericChecks.isSquare(op) {
            return (nil, "Divide x by its row max|x| before squaring (x² overflows fp16 from |x| > 256), or compute it in fp32.")
        }
        if op.operandValues.contains(where: { v in
            var p = v.producer
            if p?.type == "cast" { p = p?.operand("x")?.value?.producer }
            return p.map { ClampFP16Constants.outOfRange($0, uses: uses) != nil } ?? false
        }) || (op.type == "cast" && op.operand("x")?.value?.producer.map { ClampFP16Constants.outOfRange($0, uses: uses) != nil } == true) {
            return (ClampFP16Constants.name, "Clamp the constant into the fp16 range (clamp_fp16_constants).")
        }
        return (nil, "Keep this op in fp32 (coremltools: compute_precision=ct.transform.FP16ComputePrecision(op_selector=…)) or rescale its inputs.")
    }

    /// Values carrying an additive mask: a float input named `*mask*`, and what `cast`, reshapes,
    /// slices and `add` / `sub` make of it (scores + mask). Their large negative entries are by
    /// design, so they do not count as the largest value.
    static func maskDerivedValues(_ f: Function) -> Set<ObjectIdentifier> {
        var out = Set(f.inputs.filter { $0.name.lowercased().contains("mask") && $0.type.tensorType?.dtype.isFloat == true }.map { ObjectIdentifier($0) })
        let through: Set<String> = ["cast", "reshape", "expand_dims", "squeeze", "tile", "transpose", "slice_by_index", "slice_by_size",
                                    "identity", "add", "sub", "mul", "real_div"]
        f.body.walk { op in
            guard through.contains(op.type), op.operandValues.contains(where: { out.contains(ObjectIdentifier($0)) }) else { return }
            for v in op.outputs { out.insert(ObjectIdentifier(v)) }
        }
        return out
    }
}
