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
        // Tensor lists: list values, not tensors; the declared types are used.
        "make_list": "a list value: the declared type is used",
        "list_write": "a list value: the declared type is used",
        "list_scatter": "a list value: the declared type is used",
        "list_read": "the element type of a list: the declared type is used",
        "list_gather": "the element type of a list: the declared type is used",
        "list_length": "a scalar int32 (run-time list length)",
        "upsample_bilinear": "output floor(H·scale) with a float scale: the declared type is used",
        "upsample_nearest_neighbor": "output floor(H·scale) with a float scale: the declared type is used",
        "resize": "target sizes may come from a run-time shape tensor: the declared type is used",
        "crop_resize": "iOS15/16 and iOS17 forms differ in rank: the declared type is used",
        "random_uniform": "a draw whose shape may come from a run-time tensor: the declared type is used",
        "random_normal": "a draw whose shape may come from a run-time tensor: the declared type is used",
        "random_bernoulli": "a draw whose shape may come from a run-time tensor: the declared type is used",
        "random_categorical": "x.shape[:-1] + [size]: the declared type is used",
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
        add(OpSchema("reshape_like", [x(), InputSpec("ref_tensors", variadic: true), InputSpec("begins", .integer, variadic: true),
                                       InputSpec("ends", .integer, variadic: true), InputSpec("end_masks", .bool, variadic: true)]))
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
        add(OpSchema("pixel_unshuffle", [x(), req("downscale_factor", .integer)]))
        add(OpSchema("space_to_batch", [x(), req("block_shape", .integer), req("paddings", .integer)]))
        add(OpSchema("batch_to_space", [x(), req("block_shape", .integer), req("crops", .integer)]))
        add(OpSchema("reverse_sequence", [x(), req("lengths", .integer), opt("seq_axis", .integer), opt("batch_axis", .integer)]))
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

        // Recurrent (iOS15; fp16 iOS17; gru reset_after / input_bias iOS18).
        add(OpSchema("lstm", [x(.float), req("initial_h", .float), req("initial_c", .float), req("weight_ih", .float), req("weight_hh", .float),
                              opt("bias", .float), opt("peephole", .float), opt("weight_ih_back", .float), opt("weight_hh_back", .float),
                              opt("bias_back", .float), opt("peephole_back", .float), opt("direction", .string), opt("output_sequence", .bool),
                              opt("recurrent_activation", .string), opt("cell_activation", .string), opt("activation", .string), opt("clip", .float)]))
        add(OpSchema("gru", [x(.float), req("initial_h", .float), req("weight_ih", .float), req("weight_hh", .float), opt("bias", .float),
                             opt("direction", .string), opt("output_sequence", .bool), opt("recurrent_activation", .string),
                             opt("activation", .string), opt("reset_after", .bool), opt("input_bias", .float)]))
        add(OpSchema("rnn", [x(.float), req("initial_h", .float), req("weight_ih", .float), req("weight_hh", .float), opt("bias", .float),
                             opt("direction", .string), opt("output_sequence", .bool), opt("activation", .string)]))

        // Image resizing (iOS15; crop_resize pad_value and upsample_bilinear half_pixel_centers iOS16;
        // crop_resize boxes/box_indices and resize iOS17).
        add(OpSchema("resize_bilinear", [x(.float), opt("target_size_height", .integer), opt("target_size_width", .integer), opt("sampling_mode", .string)]))
        add(OpSchema("resize_nearest_neighbor", [x(.float), req("target_size_height", .integer), req("target_size_width", .integer)]))
        add(OpSchema("resize", [x(.numeric), req("shape", .integer), req("resized_dims", .integer), opt("interpolation_mode", .string), opt("sampling_mode", .string)]))
        add(OpSchema("upsample_bilinear", [x(.float), opt("scale_factor_height", .numeric), opt("scale_factor_width", .numeric), opt("align_corners", .bool),
                                           opt("half_pixel_centers", .bool)]))
        add(OpSchema("upsample_nearest_neighbor", [x(.float), opt("scale_factor_height", .numeric), opt("scale_factor_width", .numeric)]))
        add(OpSchema("crop", [x(.float), req("crop_height", .integer), req("crop_width", .integer)]))
        add(OpSchema("crop_resize", [x(.float), opt("roi", .float), opt("boxes", .numeric), opt("box_indices", .integer), opt("target_height", .integer),
                                     opt("target_width", .integer), opt("normalized_coordinates", .bool), opt("spatial_scale", .float),
                                     opt("box_coordinate_mode", .string), opt("sampling_mode", .string), opt("pad_value", .float)]))
        add(OpSchema("resample", [x(.float), req("coordinates", .numeric), req("sampling_mode", .string), req("padding_mode", .string),
                                  req("padding_value", .float), req("coordinates_mode", .string), req("align_corners", .bool)]))
        add(OpSchema("affine", [x(.float), req("transform_matrix", .float), req("output_height", .integer), req("output_width", .integer),
                                req("sampling_mode", .string), req("padding_mode", .string), req("padding_value", .float),
                                req("coordinates_mode", .string), req("align_corners", .bool)]))

        // Random (iOS15).
        add(OpSchema("random_uniform", [req("shape", .integer), opt("low", .float), opt("high", .float), opt("seed", .integer)]))
        add(OpSchema("random_normal", [req("shape", .integer), opt("mean", .float), opt("stddev", .float), opt("seed", .integer)]))
        add(OpSchema("random_bernoulli", [req("shape", .integer), opt("prob", .float), opt("seed", .integer)]))
        add(OpSchema("random_categorical", [x(.float), opt("mode", .string), opt("size", .integer), opt("seed", .integer)]))

        // Tensor lists (iOS15 control_flow), carried through while_loop.
        add(OpSchema("make_list", [opt("init_length", .integer), opt("dynamic_length", .bool), InputSpec("elem_shape", optional: true, variadic: true), opt("dtype", .string)]))
        add(OpSchema("list_length", [req("ls")]))
        add(OpSchema("list_write", [req("ls"), req("index", .integer), req("value")]))
        add(OpSchema("list_read", [req("ls"), req("index", .integer)]))
        add(OpSchema("list_gather", [req("ls"), req("indices", .integer)]))
        add(OpSchema("list_scatter", [req("ls"), req("indices", .integer), req("value")]))

        // Control flow: inputs vary.
        family = .controlFlow
        add(OpSchema("cond", [req("pred", .bool)], isControlFlow: true))
        add(OpSchema("while_loop", [InputSpec("loop_vars", variadic: true)], isControlFlow: true))
        return (t, duplicates)
    }()
}
