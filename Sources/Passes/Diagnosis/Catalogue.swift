/// The failure patterns `forge-ir diagnose` knows, each with the public report it comes from
/// and its fix. The README's catalogue table is this list; `Tests/PassesTests/CatalogueTests`
/// checks one fixture per entry.
public struct CataloguePattern: Sendable {
    public var code: String
    public var severity: Finding.Severity
    /// What the graph looks like, in a line.
    public var pattern: String
    /// Where the failure was reported publicly.
    public var report: String
    /// The forge-ir pass that fixes it (nil: advice only).
    public var fixPass: String?
    /// The fix in words.
    public var fix: String
}

public enum Catalogue {
    public static let patterns: [CataloguePattern] = [
        .init(code: "state_mixed_flexibility", severity: .error,
              pattern: "stateful function whose inputs mix EnumeratedShapes and RangeDim (error), or fixed and RangeDim (warning: the report's repro; Core ML takes the fixed shape as enumerated)",
              report: "coremltools#2548 (Core ML aborts loading: EnumeratedWithRangeInputsException)",
              fixPass: "specialize_sequence", fix: "one static function per size sharing the states, or the same kind of flexibility on every input"),
        .init(code: "state_range_int_input", severity: .warning,
              pattern: "RangeDim integer input (token ids, positions) next to states",
              report: "coremltools#2500 (std::bad_cast, \"Failed to build the model execution plan\", error -14); coremltools' stateful-models guide",
              fixPass: "specialize_sequence", fix: "static prefill / decode functions sharing the states (multifunction package)"),
        .init(code: "enumerated_shapes_with_state", severity: .error,
              pattern: "stateful function with EnumeratedShapes inputs",
              report: "forge-ir's seed check (Core ML refuses to load); see coremltools#2548 for the enumerated/range exception",
              fixPass: "specialize_sequence", fix: "one static function per enumerated size"),
        .init(code: "enumerated_shapes_combinations", severity: .warning,
              pattern: "two or more inputs with their own EnumeratedShapes",
              report: "coremltools#2271 (only the listed combinations are accepted, not the cross product)",
              fixPass: nil, fix: "enumerate the shapes of one input only, or one function per combination"),
        .init(code: "gather_index_narrowed", severity: .error,
              pattern: "gather index cast to a narrower integer (int32 → int16 token ids) on a table with more rows than it holds",
              report: "coremltools#2222 (token ids above 32767 wrap and pick the wrong rows)",
              fixPass: "widen_gather_index", fix: "remove the narrowing cast (gather takes int32 indices)"),
        .init(code: "narrowing_cast_on_input", severity: .warning,
              pattern: "integer cast to 8/16 bits of a value computed from a function input",
              report: "coremltools#2222",
              fixPass: nil, fix: "keep run-time integers in int32"),
        .init(code: "gather_table_over_uint16", severity: .warning,
              pattern: "gather indexed by an input into a table with more than 65 535 rows",
              report: "pytorch/executorch PR#7616 (uint16 index limit on the Neural Engine)",
              fixPass: nil, fix: "split the table into halves of at most 65 535 rows, or run the gather on CPU"),
        .init(code: "quantization_scale_invalid", severity: .error,
              pattern: "quantization scale that is zero, NaN or inf (per op and channel)",
              report: "coremltools#2853 (a block of weights becomes all zeros / NaN)",
              fixPass: nil, fix: "re-quantize the weight (scale = max|w| / qmax, never 0)"),
        .init(code: "rmsnorm_eps_scaled", severity: .warning,
              pattern: "coremltools' rms_norm lowering: eps added to the mean of (x / max|x|)² (eps effectively eps·max²)",
              report: "coremltools#2821",
              fixPass: "exact_rms_norm", fix: "add eps / max² instead (the exact RMSNorm, still overflow-safe)"),
        .init(code: "state_dim_not_multiple_of_32", severity: .info,
              pattern: "state whose last dimension is not a multiple of 32",
              report: "coremltools#2631 (stateful model fails on the Neural Engine, CPU/GPU fine)",
              fixPass: nil, fix: "pad the state's last dimension to a multiple of 32"),
        .init(code: "fp16_log_softmax", severity: .warning,
              pattern: "log of an fp16 softmax",
              report: "coremltools#2728 (−inf once a probability underflows)",
              fixPass: "log_softmax_stable", fix: "x − reduce_log_sum_exp(x)"),
        .init(code: "slice_update_rank", severity: .error,
              pattern: "slice_update whose begin/end have fewer entries than the tensor's rank",
              report: "apple/coreai-models#275",
              fixPass: "pad_slice_update", fix: "pad begin/end (0 / the dimension, masks set) to the rank"),
        .init(code: "state_write_runtime_end", severity: .warning,
              pattern: "slice_update of a state whose begin/end are computed at run time (any rank: a 5-D [2,1,4,16,8] cache written at [1, :, :2, pos:pos+1, :]); a warning, not an error: Apple's Llama 3.1 Core ML article runs this very write on the GPU",
              report: "coremltools#2325 (execution plan fails to build; E5RT/BNNS errors at S=1); apple/coreai-torch#6 (ANECompiler crash at load when slice_update indices are run-time values)",
              fixPass: "lower_slice_update", fix: "a static-window scatter at begin + range(S)"),
        .init(code: "rank0_expand_dims_swap", severity: .error,
              pattern: "rank-0 add/sub/mul/real_div/floor_div of a scalar const used by one expand_dims and by a tuple input (stack, concat)",
              report: "coremltools' rank0_expand_dims_swap pass: \"Cannot delete op … with active output\" (default pipeline fails)",
              fixPass: "split_rank0_expand_dims", fix: "compute the expand_dims user's copy in rank 1 (the swap the pass attempts)"),
        .init(code: "unsupported_op", severity: .info,
              pattern: "an op with no kernel in forge-ir",
              report: "forge-ir (diagnose and run agree)",
              fixPass: nil, fix: "file an issue; the run-time checks skip this function"),
        .init(code: "state_output_alias", severity: .error,
              pattern: "model output that is also the value written to a state",
              report: "Core ML runtime crash (coremltools stateful-models guide)",
              fixPass: "insert_state_output_copy", fix: "return an identity copy"),
    ]

    public static func pattern(_ code: String) -> CataloguePattern? { patterns.first { $0.code == code } }

    /// A finding of a catalogue pattern (severity, fix pass and report from the table).
    static func finding(_ code: String, function: String, op: Finding.OpRef? = nil, shapes: [ShapeNote] = [],
                        message: String, fix: String? = nil) -> Finding {
        guard let p = pattern(code) else { return Finding(.info, code, function: function, op: op, shapes: shapes, message: message, fix: fix ?? "") }
        return Finding(p.severity, code, function: function, op: op, shapes: shapes,
                       message: message + " [\(p.report.components(separatedBy: " (").first ?? p.report)]", fixPass: p.fixPass, fix: fix ?? p.fix)
    }

    /// The README table.
    public static var markdownTable: String {
        var out = "| code | severity | pattern | public report | fix |\n|---|---|---|---|---|\n"
        for p in patterns {
            let fix = (p.fixPass.map { "`\($0)`: " } ?? "") + p.fix
            out += "| `\(p.code)` | \(p.severity.rawValue) | \(p.pattern) | \(p.report) | \(fix) |\n"
        }
        return out
    }
}
