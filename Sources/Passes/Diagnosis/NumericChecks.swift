import GraphIR

/// fp16-unsafe idioms visible in the graph without running it.
public enum NumericChecks {
    static let fp16Max = 65504.0

    /// - Parameter inference: when given, shapes are named with their flexible dimensions'
    ///   symbols (else as declared, `?`).
    static func run(function f: Function, inference: ShapeInference? = nil) -> [Finding] {
        var out: [Finding] = []
        func note(_ name: String, _ v: Value) -> ShapeNote {
            if let t = inference?.symbolic.type(of: v)?.tensor { return ShapeNote(name, t) }
            return ShapeNote(name, v.type)
        }
        let idx = OpIndex(f)
        let uses = UseMap(f)
        var ops: [Op] = []
        f.body.walk { ops.append($0) }
        for op in ops {
            // An RMSNorm / variance that squares in fp16: x*x overflows once |x| > 256.
            if isSquare(op), let out0 = op.outputs.first, out0.type.tensorType?.dtype == .fp16,
               let x = op.operand("x")?.value, !isScaledByRowMax(x),
               uses.users(of: out0).contains(where: { $0.type == "reduce_mean" || $0.type == "reduce_sum" }) {
                let idiom = RMSNormIdiom.match(square: op, uses: uses)
                out.append(Finding(.info, "fp16_square_in_norm", function: f.name, op: idx.ref(op),
                                   shapes: [note("x", out0)],
                                   message: "squares in fp16 before a mean (\(idiom.map { "RMSNorm: " + $0.chain } ?? "RMSNorm/variance")): overflows to inf once |x| > 256; check with --precision fp16 on real activations",
                                   fixPass: idiom != nil ? FP16SafeRMSNorm.name : nil,
                                   fix: idiom != nil ? "Divide x by its row max|x| before squaring (fp16_safe_rms_norm)." : "Divide x by its row max|x| before squaring, or compute the norm in fp32."))
            }
            // Constants beyond the fp16 range (a -1e9 / -3.4e38 mask) in an fp16 computation.
            if op.type == "const", let v = op.outputs.first, let c = op.attribute("val"), let t = c.type.tensorType,
               let bad = ClampFP16Constants.outOfRange(op, uses: uses) {
                let mask = ClampFP16Constants.isAdditiveMask(v, uses: uses)
                let clampTo = mask && bad < 0 ? "\(Int(ClampFP16Constants.maskValue))" : bad < 0 ? "-65504" : "65504"
                let message = t.dtype == .fp16
                    ? "fp16 constant '\(v.name)' holds \(bad) (a value beyond the fp16 range); inf - inf and fully masked softmax rows give NaN"
                    : "constant '\(v.name)' holds \(bad), beyond the fp16 range (±65504), and feeds an fp16 op: it becomes ±inf (a mask row of -inf gives NaN in softmax)"
                out.append(Finding(.warning, "fp16_constant_out_of_range", function: f.name, op: idx.ref(op),
                                   shapes: [ShapeNote(v.name, t)],
                                   message: message, fixPass: ClampFP16Constants.name,
                                   fix: "Clamp the constant to \(clampTo) (clamp_fp16_constants: additive masks to \(Int(ClampFP16Constants.maskValue)), other values to ±65504)."))
            }
            // log(softmax(x)): log of an fp16 probability that underflowed to 0 is -inf.
            if op.type == "log", let x = op.operand("x")?.value, x.producer?.type == "softmax", x.type.tensorType?.dtype == .fp16 {
                out.append(Finding(.warning, "fp16_log_softmax", function: f.name, op: idx.ref(op),
                                   shapes: [note("x", x)],
                                   message: "log(softmax(x)) in fp16: probabilities below 6e-8 round to 0 and their log is -inf (coremltools#2728)",
                                   fixPass: LogSoftmaxStable.name,
                                   fix: "Compute log_softmax as x - reduce_log_sum_exp(x)."))
            }
        }
        return out
    }

    /// `v = real_div(x, s)` with `s` = `reduce_max(abs(x))` (possibly through `maximum` or `clip`): the
    /// overflow-safe form (coremltools' `rms_norm` lowering, `fp16_safe_rms_norm`'s output).
    static func isScaledByRowMax(_ v: Value) -> Bool {
        guard let div = v.producer, div.type == "real_div", let x = div.operand("x")?.value,
              var s = div.operand("y")?.value?.producer else { return false }
        // The row max may pass through a floor: maximum(m, eps) or clip(m, alpha = eps, …).
        if s.type == "maximum" || s.type == "clip", let inner = s.operand("x")?.value?.producer { s = inner }
        guard s.type == "reduce_max", let a = s.producer(of: "x", type: "abs") else { return false }
        return a.operand("x")?.value === x
    }

    public static func isSquare(_ op: Op) -> Bool {
        switch op.type {
        case "square": return true
        case "mul":
            guard let x = op.operand("x")?.value, let y = op.operand("y")?.value else { return false }
            return x === y
        case "pow":
            guard let y = op.operand("y") else { return false }
            return y.constValue?.doubles() == [2]
        default: return false
        }
    }
}
