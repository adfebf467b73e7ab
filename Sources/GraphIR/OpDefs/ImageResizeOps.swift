/// Image resizing and sampling (MIL `image_resizing`): resize, upsample, crop, crop_resize,
/// resample, affine. Kernels: `Interpreter/ImageResizeKernels.swift`.
extension OpDefs {
    static func declareImageResizing(_ b: inout OpTableBuilder) {
        b.family = .image
        // Image resizing (iOS15; crop_resize pad_value and upsample_bilinear half_pixel_centers iOS16;
        // crop_resize boxes/box_indices and resize iOS17).
        b.add(OpSchema("resize_bilinear", [x(.float), opt("target_size_height", .integer), opt("target_size_width", .integer), opt("sampling_mode", .string)]), rule: resizeRule("resize_bilinear"))
        b.add(OpSchema("resize_nearest_neighbor", [x(.float), req("target_size_height", .integer), req("target_size_width", .integer)]), rule: resizeRule("resize_nearest_neighbor"))
        b.add(OpSchema("resize", [x(.numeric), req("shape", .integer), req("resized_dims", .integer), opt("interpolation_mode", .string), opt("sampling_mode", .string)]),
              declaredTypeOnly: "target sizes may come from a run-time shape tensor: the declared type is used")
        b.add(OpSchema("upsample_bilinear", [x(.float), opt("scale_factor_height", .numeric), opt("scale_factor_width", .numeric), opt("align_corners", .bool),
                                           opt("half_pixel_centers", .bool)]),
              declaredTypeOnly: "output floor(H·scale) with a float scale: the declared type is used")
        b.add(OpSchema("upsample_nearest_neighbor", [x(.float), opt("scale_factor_height", .numeric), opt("scale_factor_width", .numeric)]),
              declaredTypeOnly: "output floor(H·scale) with a float scale: the declared type is used")
        b.add(OpSchema("crop", [x(.float), req("crop_height", .integer), req("crop_width", .integer)])) { ctx in
            let x = try ctx.tensor("x")
            var xs = try ctx.shape("x")
            guard xs.count >= 3, let ch = ctx.constInts("crop_height"), let cw = ctx.constInts("crop_width"), ch.count == 2, cw.count == 2 else { throw Unsupported() }
            xs[xs.count - 2] = xs[xs.count - 2] - DimExpr(ch[0] + ch[1])
            xs[xs.count - 1] = xs[xs.count - 1] - DimExpr(cw[0] + cw[1])
            return [t(x.dtype, xs)]
        }
        b.add(OpSchema("crop_resize", [x(.float), opt("roi", .float), opt("boxes", .numeric), opt("box_indices", .integer), opt("target_height", .integer),
                                     opt("target_width", .integer), opt("normalized_coordinates", .bool), opt("spatial_scale", .float),
                                     opt("box_coordinate_mode", .string), opt("sampling_mode", .string), opt("pad_value", .float)]),
              declaredTypeOnly: "iOS15/16 and iOS17 forms differ in rank: the declared type is used")
        b.add(OpSchema("resample", [x(.float), req("coordinates", .numeric), req("sampling_mode", .string), req("padding_mode", .string),
                                  req("padding_value", .float), req("coordinates_mode", .string), req("align_corners", .bool)])) { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x"), cs = try ctx.shape("coordinates")
            guard xs.count == 4, cs.count == 4 else { throw ctx.fail(.shapeError, "resample needs x [B, C, H, W] and coordinates [B, H2, W2, 2]", [("x", text(xs)), ("coordinates", text(cs))]) }
            return [t(x.dtype, [xs[0], xs[1], cs[1], cs[2]])]
        }
        b.add(OpSchema("affine", [x(.float), req("transform_matrix", .float), req("output_height", .integer), req("output_width", .integer),
                                req("sampling_mode", .string), req("padding_mode", .string), req("padding_value", .float),
                                req("coordinates_mode", .string), req("align_corners", .bool)])) { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x")
            guard xs.count == 4, let h = ctx.constInt("output_height"), let w = ctx.constInt("output_width") else { throw Unsupported() }
            return [t(x.dtype, [xs[0], xs[1], DimExpr(h), DimExpr(w)])]
        }

    }

    /// `resize_bilinear` / `resize_nearest_neighbor`: the last two axes become the target sizes.
    static func resizeRule(_ op: String) -> ShapeRule {
        return { ctx in
            let x = try ctx.tensor("x")
            var xs = try ctx.shape("x")
            guard xs.count >= 3 else { throw ctx.fail(.shapeError, "\(op) needs x of rank >= 3", [("x", text(xs))]) }
            guard let h = ctx.constInt("target_size_height") ?? (op == "resize_bilinear" ? 1 : nil),
                  let w = ctx.constInt("target_size_width") ?? (op == "resize_bilinear" ? 1 : nil) else { throw Unsupported() }
            xs[xs.count - 2] = DimExpr(h)
            xs[xs.count - 1] = DimExpr(w)
            return [t(x.dtype, xs)]
        }
    }
}
