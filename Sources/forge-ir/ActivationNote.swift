import GraphIR
import Interpreter

/// The note `run`, `generate`, `bench` and `compare` print when `--activations int16` meets
/// int4 weights: the int16 activation route exists for int8-weight products only, so the
/// int4-weight products (``QuantizedGEMM`` `ntInt4`) compute with exact fp32 activations.
enum ActivationNote {
    /// Whether an op of `f` (nested blocks included) reads an int4-typed operand — the packed
    /// int4 weights of `constexpr_blockwise_shift_scale` (coremltools'
    /// `linear_quantize_weights(dtype="int4")`), the only int4 values the interpreter keeps packed.
    static func readsInt4(_ f: Function) -> Bool {
        var found = false
        f.body.walk { op in
            guard !found else { return }
            for i in op.inputs { for o in i.operands where o.type.tensorType?.dtype == .int4 { found = true } }
        }
        return found
    }

    /// The one-line note (without a newline) for `mode` on `functions`, or nil when there is
    /// nothing to say: the mode is not int16, the precision is not fp32 (fp16 ignores
    /// `--activations`), or no function reads int4 weights.
    static func text(_ mode: ActivationQuantization, precision: Precision, functions: [Function]) -> String? {
        guard mode == .int16, precision == .fp32, functions.contains(where: readsInt4) else { return nil }
        return "note: --activations int16 applies to int8-weight products only; this model's int4-weight products compute with exact fp32 activations (int4 takes fp32 or --activations int8)"
    }

    /// Prints ``text(_:precision:functions:)`` to stderr when there is one.
    static func print(_ mode: ActivationQuantization, precision: Precision, functions: [Function]) {
        if let t = text(mode, precision: precision, functions: functions) { Console.err(t + "\n") }
    }
}
