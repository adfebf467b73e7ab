/// How products with int8 block-quantized weights (``QuantizedGEMM``) treat their fp32
/// activations. Only `fp32` precision uses anything but ``exact``; the default is ``exact``.
///
/// - ``exact``: fp32 activations (Core ML's CPU numerics; `fk_qgemm_nt`).
/// - ``int8``: each activation row quantized to int8 per block of 32 as llama.cpp's Q8_0
///   (`fk_qgemm_nt_q8`). On SmolLM2-135M its teacher-forced top-1 agreement with ``exact`` is
///   93.9–96.7 % (README "Performance").
/// - ``int16``: each row quantized to int16 per block of 32 (d = max|x| / 32767;
///   `fk_qgemm_nt_q16`): ~256× finer steps than Q8, int32-exact block sums.
///
/// Neither quantized mode is Core ML's numerics; both are opt-in (`--activations`).
public enum ActivationQuantization: String, Sendable, CaseIterable {
    case exact = "fp32"
    case int8
    case int16
}
