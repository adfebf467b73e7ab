/// The table of MIL ops forge-ir knows (``OpSchema`` per op). The verifier, the printer,
/// the passes and the interpreter all read this one table.
public enum OpRegistry {
    public static func schema(_ op: String) -> OpSchema? { table[op] }
    public static var allOps: [String] { table.keys.sorted() }
    /// Names declared more than once (the later declaration would win): must stay empty.
    public static var duplicateNames: [String] { built.duplicates }

    /// Ops without a shape rule: shape inference keeps the type the file declares for their
    /// outputs, and the reason. The coverage test fails on a schema with neither.
    public static let declaredTypeOnly: [String: String] = [
        "einsum": "output shape follows the equation string; the declared type is used",
        "non_zero": "output length depends on the data",
        "non_maximum_suppression": "output count depends on the data",
        "cond": "outputs are those of the taken branch; the declared types are used",
        "while_loop": "outputs are the loop variables; the declared types are used",
        // Compressed constants: their outputs are constants whose type the file states exactly.
        "constexpr_affine_dequantize": "a constant: its declared type is exact",
        "constexpr_blockwise_shift_scale": "a constant: its declared type is exact",
        "constexpr_cast": "a constant: its declared type is exact",
        "constexpr_lut_to_dense": "a constant: its declared type is exact",
        "constexpr_lut_to_sparse": "a constant: its declared type is exact",
        "constexpr_sparse_blockwise_shift_scale": "a constant: its declared type is exact",
        "constexpr_sparse_to_dense": "a constant: its declared type is exact",
        // No symbolic rule yet: the declared type is used (no flexible recipe in scope feeds a
        // flexible dimension through them).
        "conv": "no symbolic rule yet: the declared type is used",
        "conv_transpose": "no symbolic rule yet: the declared type is used",
        "avg_pool": "no symbolic rule yet: the declared type is used",
        "max_pool": "no symbolic rule yet: the declared type is used",
        "l2_pool": "no symbolic rule yet: the declared type is used",
        "depth_to_space": "no symbolic rule yet: the declared type is used",
        "space_to_depth": "no symbolic rule yet: the declared type is used",
        "pixel_shuffle": "no symbolic rule yet: the declared type is used",
        "reshape_like": "no symbolic rule yet: the declared type is used",
        "sliding_windows": "no symbolic rule yet: the declared type is used",
    ]

    static var table: [String: OpSchema] { built.table }

    private static let built: (table: [String: OpSchema], duplicates: [String]) = {
        var t: [String: OpSchema] = [:]
        var duplicates: [String] = []
        var family = OpFamily.constant
        func add(_ s: OpSchema) {
            var s = s
            s.family = family
            if t[s.name] != nil { duplicates.append(s.name) }
            t[s.name] = s
        }
        func x(_ d: TypeDomain = .any) -> InputSpec { InputSpec("x", d) }
        func opt(_ n: String, _ d: TypeDomain = .any) -> InputSpec { InputSpec(n, d, optional: true) }
        func req(_ n: String, _ d: TypeDomain = .any) -> InputSpec { InputSpec(n, d) }

        add(OpSchema("const", [], isConstant: true))

        family = .elementwise
        // Elementwise binary (MIL elementwise_binary): x, y with broadcasting.
        for op in ["add", "sub", "mul", "real_div", "pow", "maximum", "minimum", "floor_div", "mod",
                   "equal", "not_equal", "greater", "greater_equal", "less", "less_equal"] {
            add(OpSchema(op, [req("x", .numeric), req("y", .numeric)]))
        }
        for op in ["logical_and", "logical_or", "logical_xor"] {
            add(OpSchema(op, [req("x", .bool), req("y", .bool)]))
        }
        // Elementwise unary.
        for op in ["abs", "acos", "asin", "atan", "atanh", "ceil", "cos", "cosh", "erf", "exp", "exp2",
                   "floor", "round", "sign", "sin", "sinh", "sqrt", "square", "tan", "tanh", "acosh", "asinh"] {
            add(OpSchema(op, [x(.numeric)]))
        }
        add(OpSchema("logical_not", [x(.bool)]))
        for op in ["rsqrt", "inverse", "log"] { add(OpSchema(op, [x(.numeric), opt("epsilon", .float)])) }
        add(OpSchema("clip", [x(.float), req("alpha", .float), req("beta", .float)]))
        add(OpSchema("threshold", [x(.float), req("alpha", .float)]))
        add(OpSchema("cast", [x(), req("dtype", .string)]))
        add(OpSchema("identity", [x()]))

        family = .activation
        for op in ["relu", "relu6", "sigmoid", "silu", "softplus", "softsign"] { add(OpSchema(op, [x(.float)])) }
        add(OpSchema("gelu", [x(.float), opt("mode", .string)]))
        add(OpSchema("elu", [x(.float), opt("alpha", .float)]))
        add(OpSchema("leaky_relu", [x(.float), opt("alpha", .float)]))
        add(OpSchema("thresholded_relu", [x(.float), opt("alpha", .float)]))
        add(OpSchema("prelu", [x(.float), req("alpha", .float)]))
        add(OpSchema("clamped_relu", [x(.float), req("alpha", .float), req("beta", .float)]))
        add(OpSchema("sigmoid_hard", [x(.float), opt("alpha", .float), opt("beta", .float)]))
        add(OpSchema("scaled_tanh", [x(.float), opt("alpha", .float), opt("beta", .float)]))
        add(OpSchema("linear_activation", [x(.float), req("alpha", .float), opt("beta", .float)]))
        add(OpSchema("softplus_parametric", [x(.float), req("alpha", .float), req("beta", .float)]))
        add(OpSchema("softmax", [x(.float), opt("axis", .integer)]))

        family = .reduction
        for op in ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_l1_norm",
                   "reduce_l2_norm", "reduce_log_sum", "reduce_log_sum_exp", "reduce_sum_square"] {
            add(OpSchema(op, [x(.numeric), opt("axes", .integer), opt("keep_dims", .bool)]))
        }
        for op in ["reduce_argmax", "reduce_argmin"] {
            add(OpSchema(op, [x(.numeric), opt("axis", .integer), opt("keep_dims", .bool), opt("output_dtype", .string)]))
        }

        family = .linalg
        add(OpSchema("linear", [x(.float), req("weight", .float), opt("bias", .float)], compressedInputs: ["weight"]))
        add(OpSchema("matmul", [x(.numeric), req("y", .numeric), opt("transpose_x", .bool), opt("transpose_y", .bool)], compressedInputs: ["y"]))
        add(OpSchema("einsum", [InputSpec("values", .numeric, variadic: true), req("equation", .string)]))
        add(OpSchema("scaled_dot_product_attention", [req("query", .float), req("key", .float), req("value", .float), opt("attn_mask")]))

        family = .normalization
        add(OpSchema("layer_norm", [x(.float), opt("axes", .integer), opt("gamma", .float), opt("beta", .float), opt("epsilon", .float)]))
        add(OpSchema("instance_norm", [x(.float), opt("gamma", .float), opt("beta", .float), opt("epsilon", .float)]))
        add(OpSchema("batch_norm", [x(.float), req("mean", .float), req("variance", .float), opt("gamma", .float), opt("beta", .float), opt("epsilon", .float)]))
        add(OpSchema("l2_norm", [x(.float), opt("axes", .integer), opt("epsilon", .float)]))
        add(OpSchema("local_response_norm", [x(.float), req("size", .integer), opt("alpha", .float), opt("beta", .float), opt("k", .float)]))

        family = .transform
        add(OpSchema("reshape", [x(), req("shape", .integer)]))
        add(OpSchema("reshape_like", [x(), InputSpec("ref_tensors", variadic: true), req("begins", .integer), req("ends", .integer), req("end_masks", .bool)]))
        add(OpSchema("transpose", [x(), req("perm", .integer)]))
        add(OpSchema("expand_dims", [x(), req("axes", .integer)]))
        add(OpSchema("squeeze", [x(), opt("axes", .integer)]))
        add(OpSchema("flatten2d", [x(), opt("axis", .integer)]))
        add(OpSchema("reverse", [x(), opt("axes", .integer)]))
        add(OpSchema("slice_by_index", [x(), req("begin", .integer), req("end", .integer), opt("stride", .integer),
                                        opt("begin_mask", .bool), opt("end_mask", .bool), opt("squeeze_mask", .bool)]))
        add(OpSchema("slice_by_size", [x(), req("begin", .integer), req("size", .integer)]))
        add(OpSchema("concat", [InputSpec("values", variadic: true), req("axis", .integer), opt("interleave", .bool)]))
        add(OpSchema("stack", [InputSpec("values", variadic: true), req("axis", .integer)]))
        add(OpSchema("split", [x(), opt("num_splits", .integer), opt("split_sizes", .integer), req("axis", .integer)]))
        add(OpSchema("tile", [x(), req("reps", .integer)]))
        add(OpSchema("pad", [x(), req("pad", .integer), opt("mode", .string), opt("constant_val")]))
        add(OpSchema("depth_to_space", [x(), req("block_size", .integer)]))
        add(OpSchema("space_to_depth", [x(), req("block_size", .integer)]))
        add(OpSchema("pixel_shuffle", [x(), req("upscale_factor", .integer)]))
        add(OpSchema("sliding_windows", [x(), req("axis", .integer), req("size", .integer), opt("stride", .integer)]))

        family = .indexing
        add(OpSchema("gather", [x(), req("indices", .integer), opt("axis", .integer), opt("batch_dims", .integer), opt("validate_indices", .bool)],
                     compressedInputs: ["x"], halfViewInputs: ["x"]))
        add(OpSchema("gather_along_axis", [x(), req("indices", .integer), opt("axis", .integer), opt("validate_indices", .bool)]))
        add(OpSchema("gather_nd", [x(), req("indices", .integer), opt("batch_dims", .integer), opt("validate_indices", .bool)]))
        for op in ["scatter", "scatter_along_axis"] {
            add(OpSchema(op, [req("data"), req("indices", .integer), req("updates"), opt("axis", .integer), opt("mode", .string), opt("validate_indices", .bool)]))
        }
        add(OpSchema("scatter_nd", [req("data"), req("indices", .integer), req("updates"), opt("mode", .string), opt("validate_indices", .bool)]))
        add(OpSchema("range_1d", [req("end", .numeric), req("start", .numeric), req("step", .numeric)]))
        add(OpSchema("shape", [x()]))
        add(OpSchema("select", [req("cond"), req("a"), req("b")]))
        add(OpSchema("fill", [req("shape", .integer), opt("value")]))
        add(OpSchema("fill_like", [req("ref_tensor"), opt("value")]))
        add(OpSchema("band_part", [x(), opt("lower", .integer), opt("upper", .integer)]))
        add(OpSchema("cumsum", [x(.numeric), opt("axis", .integer), opt("exclusive", .bool), opt("reverse", .bool)]))
        add(OpSchema("topk", [x(.numeric), opt("k", .integer), opt("axis", .integer), opt("ascending", .bool), opt("sort", .bool),
                              opt("return_indices", .bool), opt("output_indices_dtype", .string)]))
        add(OpSchema("argsort", [x(.numeric), opt("axis", .integer), opt("ascending", .bool)]))
        add(OpSchema("one_hot", [req("indices", .integer), req("one_hot_vector_size", .integer), opt("axis", .integer), opt("on_value"), opt("off_value")]))
        add(OpSchema("non_zero", [x()]))
        add(OpSchema("non_maximum_suppression", [req("boxes", .float), req("scores", .float), req("max_boxes", .integer),
                                                 opt("iou_threshold", .float), opt("score_threshold", .float), opt("per_class_suppression", .bool)]))

        family = .convolution
        add(OpSchema("conv", [x(.float), req("weight", .float), opt("bias", .float), opt("strides", .integer), opt("pad_type", .string),
                              opt("pad", .integer), opt("dilations", .integer), opt("groups", .integer)]))
        add(OpSchema("conv_transpose", [x(.float), req("weight", .float), opt("bias", .float), opt("pad", .integer), opt("output_shape", .integer),
                                        opt("pad_type", .string), opt("strides", .integer), opt("dilations", .integer), opt("groups", .integer)]))
        for op in ["avg_pool", "max_pool", "l2_pool"] {
            add(OpSchema(op, [x(.float), req("kernel_sizes", .integer), opt("strides", .integer), opt("pad_type", .string), opt("pad", .integer),
                              opt("exclude_padding_from_average", .bool), opt("ceil_mode", .bool)]))
        }

        family = .quantization
        add(OpSchema("dequantize", [req("input", .integer), req("scale", .float), opt("zero_point"), opt("axis", .integer)]))
        add(OpSchema("quantize", [req("input", .float), req("scale", .float), opt("zero_point"), opt("axis", .integer), req("output_dtype", .string)]))

        // Compressed constants (iOS18: parameters are inputs; iOS16: attributes).
        family = .compression
        add(OpSchema("constexpr_blockwise_shift_scale", [req("data"), req("scale", .float), opt("offset")], isConstant: true, halfViewInputs: ["scale"]))
        add(OpSchema("constexpr_lut_to_dense", [opt("indices"), opt("lut"), opt("vector_axis", .integer), opt("shape", .integer)], isConstant: true))
        add(OpSchema("constexpr_sparse_to_dense", [opt("nonzero_data"), opt("mask"), opt("shape", .integer)], isConstant: true))
        add(OpSchema("constexpr_affine_dequantize", [opt("quantized_data"), opt("zero_point"), opt("scale"), opt("axis", .integer)],
                     parametersInAttributes: true, isConstant: true))
        add(OpSchema("constexpr_cast", [opt("source_val"), opt("output_dtype", .string)], isConstant: true))
        add(OpSchema("constexpr_lut_to_sparse", [req("indices_mask"), req("indices_nonzero_data"), req("lut"), opt("vector_axis", .integer)], isConstant: true))
        add(OpSchema("constexpr_sparse_blockwise_shift_scale", [req("data_mask"), req("nonzero_data"), req("scale", .float), opt("offset")], isConstant: true))

        family = .state
        add(OpSchema("read_state", [req("input", .state)], stateAccess: .read))
        add(OpSchema("write_state", [req("input", .state), req("data")], hasSideEffects: true, stateAccess: .write))
        add(OpSchema("coreml_update_state", [req("state", .state), req("value")], hasSideEffects: true, stateAccess: .write))
        add(OpSchema("slice_update", [x(), req("update"), req("begin", .integer), req("end", .integer), opt("stride", .integer),
                                      opt("begin_mask", .bool), opt("end_mask", .bool), opt("squeeze_mask", .bool)]))

        // Control flow: inputs vary.
        family = .controlFlow
        add(OpSchema("cond", [req("pred", .bool)], isControlFlow: true))
        add(OpSchema("while_loop", [InputSpec("loop_vars", variadic: true)], isControlFlow: true))
        return (t, duplicates)
    }()
}
