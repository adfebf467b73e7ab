import CKernels

/// Which instruction set each family of C kernels (CKernels) runs at in this process: the
/// level `fk_simd_level` picked (the CPU's, capped by `FORGE_SIMD_LEVEL`), per family, for
/// `forge-ir bench --json` and reports.
public enum KernelISA {
    /// 0 = portable C, 1 = AVX2 + FMA + F16C, 2 = AVX-512 F/BW/VL/DQ.
    public static var level: Int { Int(fk_simd_level()) }
    /// Threads of the kernel pool (workers + the caller).
    public static var threads: Int { Int(fk_parallel_width()) }

    /// Kernel family → ISA of the body it runs (`"avx512"`, `"avx2"`, `"avx512-vnni"`,
    /// `"portable"`; `a/b` when the body depends on the shape):
    /// - `fp32_gemm`: fp32 products (`a · bᵀ` with < 4 rows take the AVX2 body at level 2);
    /// - `int8_gemv`: int8 weights, fp32 activations, ≤ 4 rows (decode);
    /// - `int8_gemm`: int8 weights, fp32 activations, more rows (prefill panels);
    /// - `int8_q8`: int8 weights × int8 activations (`--activations int8`);
    /// - `int8_q16`: int8 weights × int16 activations (`--activations int16`; 256-bit VNNI);
    /// - `attention`: the fused attention over the KV cache (F16C widening of fp16 K/V;
    ///   "avx512/avx2" at level 2: 16-wide weighted sums of V, the rest 8 wide);
    /// - `softmax`: standalone softmax rows (`fk_softmax_rows`: `softmax`, SDPA);
    /// - `gelu`: gelu EXACT (`fk_gelu_erf`).
    public static func report() -> [String: String] {
        let l = level
        let simd = l >= 2 ? "avx512" : l == 1 ? "avx2" : "portable"
        return [
            "fp32_gemm": l >= 2 ? "avx512/avx2" : simd,
            "int8_gemv": simd,
            "int8_gemm": simd,
            "int8_q8": l >= 2 && fk_cpu_has_vnni() != 0 ? "avx512-vnni" : l >= 1 ? "avx2" : "portable",
            "int8_q16": l >= 2 && fk_cpu_has_vnni() != 0 ? "avx512-vnni" : l >= 1 ? "avx2" : "portable",
            "attention": fk_attention_simd_level() == 0 ? "portable" : l >= 2 ? "avx512/avx2" : "avx2",
            "softmax": simd,
            "gelu": simd,
        ]
    }
}
