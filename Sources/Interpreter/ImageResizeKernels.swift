import Foundation
import GraphIR

/// MIL image resizing ops (iOS15 `image_resizing`, iOS16/17 revisions). Source of the semantics:
/// the MIL op reference (`coremltools.converters.mil.mil.ops.defs.iOS15.image_resizing`, iOS16,
/// iOS17) and the expected values of coremltools' op tests.
///
/// All ops work on the last two axes (H, W) of `x` (rank ≥ 3; `crop_resize`, `affine`,
/// `resample`: [B, C, H, W]), any leading axes being batch. Grid points along an axis of input
/// size `Xin` and output size `Xout` (`sampling_mode`):
/// - `STRICT_ALIGN_CORNERS`: `i·(Xin−1)/(Xout−1)` (0 when Xout = 1);
/// - `ALIGN_CORNERS`: the same, but `(Xin−1)/2` when Xout = 1;
/// - `DEFAULT`: `i·(Xin − Xin/Xout)/(Xout−1)` (0 when Xout = 1);
/// - `OFFSET_CORNERS`: `δ/2 + i·δ`, `δ = max(1, Xin−1)/Xout`;
/// - `UNALIGN_CORNERS`: `(i + 0.5)·Xin/Xout − 0.5`;
/// every point clamped to [0, Xin−1]. Bilinear interpolation mixes the two neighbours of each
/// point; nearest neighbour takes the closest input, ties to the lower index (`⌈g − 0.5⌉`, so an
/// integer upscale repeats each input).
///
/// - `resize_bilinear(x, target_size_height = 1, target_size_width = 1, sampling_mode = DEFAULT)`.
/// - `resize_nearest_neighbor(x, target_size_height, target_size_width)`: DEFAULT grid, rounded.
/// - `resize(x, shape, resized_dims, interpolation_mode = LINEAR | NEAREST_NEIGHBOR, sampling_mode)`
///   (iOS17): the last `resized_dims` axes get the last entries of `shape` (0 keeps x's size).
/// - `upsample_bilinear(x, scale_factor_height/width = 1, align_corners = true, half_pixel_centers = !align_corners)`:
///   output `floor(H·scale)`; align_corners → STRICT_ALIGN_CORNERS, half_pixel_centers →
///   UNALIGN_CORNERS, neither → DEFAULT (scale recomputed from the sizes, torch's
///   `recompute_scale_factor=True`).
/// - `upsample_nearest_neighbor(x, scale_factor_height/width = 1)`: output `Ho = floor(H·scale)`,
///   input index `floor(i·H / Ho)` (the scale recomputed from the sizes).
/// - `crop(x, crop_height [2], crop_width [2])`: removes rows/columns from both ends.
/// - `crop_resize`: see ``cropResize(_:)``; `resample`, `affine`: see ``resample(_:)``.
enum ImageResizeKernels {
    static let table: [String: Kernel] = [
        "resize_bilinear": resizeBilinear,
        "resize_nearest_neighbor": resizeNearestNeighbor,
        "resize": resize,
        "upsample_bilinear": upsampleBilinear,
        "upsample_nearest_neighbor": upsampleNearestNeighbor,
        "crop": crop,
        "crop_resize": cropResize,
        "resample": resample,
        "affine": affine,
    ]

    static let samplingModes: Set<String> = ["STRICT_ALIGN_CORNERS", "ALIGN_CORNERS", "DEFAULT", "OFFSET_CORNERS", "UNALIGN_CORNERS"]

    /// Grid points of `mode` for an axis of `xin` → `xout` samples, clamped to [0, xin−1].
    static func grid(_ mode: String, _ xin: Int, _ xout: Int) -> [Double] {
        let xi = Double(xin), xo = Double(xout)
        return (0..<xout).map { i -> Double in
            let d = Double(i)
            var g: Double
            switch mode {
            case "STRICT_ALIGN_CORNERS": g = xout == 1 ? 0 : d * (xi - 1) / (xo - 1)
            case "ALIGN_CORNERS": g = xout == 1 ? (xi - 1) / 2 : d * (xi - 1) / (xo - 1)
            case "OFFSET_CORNERS":
                let delta = Swift.max(1, xi - 1) / xo
                g = 0.5 * delta + d * delta
            case "UNALIGN_CORNERS": g = (d + 0.5) * xi / xo - 0.5
            default: g = xout == 1 ? 0 : d * (xi - xi / xo) / (xo - 1)
            }
            return Swift.min(Swift.max(g, 0), xi - 1)
        }
    }

    /// Linear interpolation taps of grid points: (lower index, upper index, weight of upper).
    static func taps(_ g: [Double], _ xin: Int) -> [(Int, Int, Float)] {
        g.map { p in
            let i0 = Swift.min(Int(p.rounded(.down)), xin - 1)
            let i1 = Swift.min(i0 + 1, xin - 1)
            return (i0, i1, Float(p - Double(i0)))
        }
    }

    /// Separable resampling of the last two axes: `rows`/`cols` are taps per output row/column.
    static func separable(_ x: Tensor, _ rows: [(Int, Int, Float)], _ cols: [(Int, Int, Float)], dtype: DType) throws -> RuntimeValue {
        guard x.rank >= 2 else { throw KernelError("image resize needs rank >= 3, x has shape \(x.shape)") }
        let h = x.shape[x.rank - 2], w = x.shape[x.rank - 1]
        let oh = rows.count, ow = cols.count
        let planes = x.shape.dropLast(2).reduce(1, *)
        let src = x.floats
        var out = [Float](repeating: 0, count: planes * oh * ow)
        if h > 0 && w > 0 {
            for p in 0..<planes {
                let base = p * h * w, ob = p * oh * ow
                for (oy, r) in rows.enumerated() {
                    for (ox, c) in cols.enumerated() {
                        let a = src[base + r.0 * w + c.0], b = src[base + r.0 * w + c.1]
                        let cc = src[base + r.1 * w + c.0], d = src[base + r.1 * w + c.1]
                        let top = a + (b - a) * c.2, bottom = cc + (d - cc) * c.2
                        out[ob + oy * ow + ox] = top + (bottom - top) * r.2
                    }
                }
            }
        }
        return EW.floatResult(dtype, Array(x.shape.dropLast(2)) + [oh, ow], out)
    }

    static func nearestTaps(_ idx: [Int]) -> [(Int, Int, Float)] { idx.map { ($0, $0, 0) } }

    static func checkRank(_ x: Tensor, _ op: String, _ minRank: Int = 3) throws {
        guard x.rank >= minRank else { throw KernelError("\(op): x must have rank >= \(minRank), has shape \(x.shape)") }
    }

    static func targetSize(_ n: Int, _ name: String, _ op: String) throws -> Int {
        guard n >= 0, n <= 1 << 24 else { throw KernelError("\(op): \(name) \(n) must be in 0...\(1 << 24)") }
        return n
    }

    static func mode(_ inv: KernelInvocation) throws -> String {
        let m = try inv.string("sampling_mode", default: "DEFAULT")
        guard samplingModes.contains(m) else {
            throw KernelError("\(inv.op.type): sampling_mode '\(m)' is not one of \(samplingModes.sorted().joined(separator: ", "))")
        }
        return m
    }

    static func resizeBilinear(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        try checkRank(x, "resize_bilinear")
        let m = try mode(inv)
        let oh = try targetSize(try inv.int("target_size_height", default: 1), "target_size_height", "resize_bilinear")
        let ow = try targetSize(try inv.int("target_size_width", default: 1), "target_size_width", "resize_bilinear")
        let h = x.shape[x.rank - 2], w = x.shape[x.rank - 1]
        return [try separable(x, taps(grid(m, h, oh), h), taps(grid(m, w, ow), w), dtype: inv.outputDType())]
    }

    static func nearestIndices(_ mode: String, _ xin: Int, _ xout: Int) -> [Int] {
        grid(mode, xin, xout).map { Swift.min(Swift.max(Int(($0 - 0.5).rounded(.up)), 0), Swift.max(xin - 1, 0)) }
    }

    static func resizeNearestNeighbor(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        try checkRank(x, "resize_nearest_neighbor")
        let oh = try targetSize(try inv.int("target_size_height"), "target_size_height", "resize_nearest_neighbor")
        let ow = try targetSize(try inv.int("target_size_width"), "target_size_width", "resize_nearest_neighbor")
        let h = x.shape[x.rank - 2], w = x.shape[x.rank - 1]
        return [try separable(x, nearestTaps(nearestIndices("DEFAULT", h, oh)), nearestTaps(nearestIndices("DEFAULT", w, ow)), dtype: inv.outputDType())]
    }

    static func resize(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        var x = try inv.tensor("x")
        let shape = try inv.ints("shape")
        let k = try inv.int("resized_dims")
        let interp = try inv.string("interpolation_mode", default: "LINEAR")
        let m = try mode(inv)
        guard k >= 0, k <= shape.count, shape.count <= x.rank else {
            throw KernelError("resize: resized_dims \(k) and shape \(shape) must satisfy resized_dims <= size(shape) <= rank(x) = \(x.rank)")
        }
        guard ["LINEAR", "NEAREST_NEIGHBOR"].contains(interp) else { throw KernelError("resize: interpolation_mode '\(interp)' is not LINEAR or NEAREST_NEIGHBOR") }
        guard k <= 2 else { throw KernelError("resize: resized_dims \(k) > 2 is not supported (only the last two axes are resampled)") }
        var targets: [Int] = []
        for i in 0..<k {
            let s = shape[shape.count - k + i]
            targets.append(s == 0 ? x.shape[x.rank - k + i] : try targetSize(s, "shape[\(shape.count - k + i)]", "resize"))
        }
        // Resample the last two axes (a 1-axis resize keeps the height).
        let wasRank1 = x.rank < 2
        if wasRank1 { x = Tensor(dtype: x.dtype, shape: [1] + x.shape, data: x.data) }
        let h = x.shape[x.rank - 2], w = x.shape[x.rank - 1]
        let oh = k == 2 ? targets[0] : h, ow = k >= 1 ? targets[k - 1] : w
        let rows: [(Int, Int, Float)], cols: [(Int, Int, Float)]
        if interp == "LINEAR" {
            rows = k == 2 ? taps(grid(m, h, oh), h) : (0..<h).map { ($0, $0, 0) }
            cols = k >= 1 ? taps(grid(m, w, ow), w) : (0..<w).map { ($0, $0, 0) }
        } else {
            rows = nearestTaps(k == 2 ? nearestIndices(m, h, oh) : Array(0..<h))
            cols = nearestTaps(k >= 1 ? nearestIndices(m, w, ow) : Array(0..<w))
        }
        guard case var .tensor(t) = try separable(x, rows, cols, dtype: inv.outputDType()) else { throw KernelError("resize: internal") }
        if wasRank1 { t.shape.removeFirst() }
        return [.tensor(t)]
    }

    static func scale(_ inv: KernelInvocation, _ name: String) throws -> Double {
        let s = Double(try inv.float(name, default: 1))
        guard s.isFinite, s > 0, s < 65536 else { throw KernelError("\(inv.op.type): \(name) \(s) must be positive and finite") }
        return s
    }

    static func upsampleBilinear(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        try checkRank(x, "upsample_bilinear")
        let sh = try scale(inv, "scale_factor_height"), sw = try scale(inv, "scale_factor_width")
        let align = try inv.bool("align_corners", default: true)
        let half = try inv.bool("half_pixel_centers", default: !align)
        guard !(align && half) else { throw KernelError("upsample_bilinear: align_corners and half_pixel_centers cannot both be true") }
        let h = x.shape[x.rank - 2], w = x.shape[x.rank - 1]
        let oh = Int((Double(h) * sh).rounded(.down)), ow = Int((Double(w) * sw).rounded(.down))
        let m = align ? "STRICT_ALIGN_CORNERS" : (half ? "UNALIGN_CORNERS" : "DEFAULT")
        return [try separable(x, taps(grid(m, h, oh), h), taps(grid(m, w, ow), w), dtype: inv.outputDType())]
    }

    static func upsampleNearestNeighbor(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        try checkRank(x, "upsample_nearest_neighbor")
        let sh = try scale(inv, "scale_factor_height"), sw = try scale(inv, "scale_factor_width")
        let h = x.shape[x.rank - 2], w = x.shape[x.rank - 1]
        let oh = Int((Double(h) * sh).rounded(.down)), ow = Int((Double(w) * sw).rounded(.down))
        let rows = (0..<oh).map { Swift.min($0 * h / Swift.max(oh, 1), h - 1) }
        let cols = (0..<ow).map { Swift.min($0 * w / Swift.max(ow, 1), w - 1) }
        return [try separable(x, nearestTaps(rows), nearestTaps(cols), dtype: inv.outputDType())]
    }

    static func crop(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        try checkRank(x, "crop")
        let ch = try inv.ints("crop_height"), cw = try inv.ints("crop_width")
        guard ch.count == 2, cw.count == 2, (ch + cw).allSatisfy({ $0 >= 0 }) else {
            throw KernelError("crop: crop_height \(ch) and crop_width \(cw) must be two non-negative values each")
        }
        let h = x.shape[x.rank - 2], w = x.shape[x.rank - 1]
        guard ch[0] + ch[1] <= h, cw[0] + cw[1] <= w else {
            throw KernelError("crop: crop_height \(ch) / crop_width \(cw) remove more than x's \(h)×\(w)")
        }
        let rows = Array(ch[0]..<(h - ch[1])), cols = Array(cw[0]..<(w - cw[1]))
        return [try separable(x, nearestTaps(rows), nearestTaps(cols), dtype: inv.outputDType())]
    }

    // MARK: - crop_resize

    /// `crop_resize`: bilinear crops of [B, C, H, W] `x` by boxes.
    /// - iOS15/16: `roi` [N, 1, 4 or 5, 1, 1] (5: a leading batch index); output [N, B, C, h, w]
    ///   (4 coordinates: each box on every image; 5: on its image, B = 1).
    /// - iOS17: `boxes` [N, 4], `box_indices` [N] (default 0…N−1); output [N, C, h, w].
    /// Coordinates by `box_coordinate_mode` (`CORNERS_HEIGHT_FIRST` [y1, x1, y2, x2],
    /// `CORNERS_WIDTH_FIRST`, `CENTER_SIZE_HEIGHT_FIRST` [yc, xc, h, w], `CENTER_SIZE_WIDTH_FIRST`),
    /// times (H−1)/(W−1) when `normalized_coordinates`, times `spatial_scale`. Each box is sampled
    /// with the `sampling_mode` grid laid over [y1, y2] (a box of `y2 − y1 + 1` pixels; ALIGN modes:
    /// `linspace(y1, y2)`); points outside the image take `pad_value` (default 0).
    static func cropResize(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        guard x.rank == 4 else { throw KernelError("crop_resize: x must be [B, C, H, W], has shape \(x.shape)") }
        let (b, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
        let th = try targetSize(try inv.int("target_height", default: 1), "target_height", "crop_resize")
        let tw = try targetSize(try inv.int("target_width", default: 1), "target_width", "crop_resize")
        let normalized = try inv.bool("normalized_coordinates", default: false)
        let spatial = Double(try inv.float("spatial_scale", default: 1))
        let boxMode = try inv.string("box_coordinate_mode", default: "CORNERS_HEIGHT_FIRST")
        let m = try mode(inv)
        let pad = try inv.float("pad_value", default: 0)
        // (image index or nil for every image, 4 coordinates)
        var boxes: [(Int?, [Double])] = []
        let iOS17 = inv.has("boxes")
        if iOS17 {
            let bt = try inv.tensor("boxes")
            guard bt.rank == 2, bt.shape[1] == 4 else { throw KernelError("crop_resize: boxes must be [N, 4], has shape \(bt.shape)") }
            let n = bt.shape[0], v = bt.floats.map(Double.init)
            let idx = try inv.optionalTensor("box_indices")?.ints.map(Int.init) ?? Array(0..<n)
            guard idx.count == n else { throw KernelError("crop_resize: box_indices has \(idx.count) values, boxes \(n)") }
            for i in 0..<n { boxes.append((idx[i], Array(v[(i * 4)..<(i * 4 + 4)]))) }
        } else {
            let roi = try inv.tensor("roi")
            guard roi.rank == 5, roi.shape[2] == 4 || roi.shape[2] == 5 else {
                throw KernelError("crop_resize: roi must be [N, 1, 4 or 5, 1, 1], has shape \(roi.shape)")
            }
            let k = roi.shape[2], n = roi.shape[0], v = roi.floats.map(Double.init)
            for i in 0..<n {
                let r = Array(v[(i * k)..<(i * k + k)])
                boxes.append(k == 5 ? (Int(r[0]), Array(r[1...])) : (nil, r))
            }
        }
        let imagesPerBox = boxes.first.map { $0.0 == nil ? b : 1 } ?? 1
        let src = x.floats
        var out: [Float] = []
        out.reserveCapacity(boxes.count * imagesPerBox * c * th * tw)
        for (index, coords) in boxes {
            var y1: Double, x1: Double, y2: Double, x2: Double
            switch boxMode {
            case "CORNERS_HEIGHT_FIRST": (y1, x1, y2, x2) = (coords[0], coords[1], coords[2], coords[3])
            case "CORNERS_WIDTH_FIRST": (x1, y1, x2, y2) = (coords[0], coords[1], coords[2], coords[3])
            case "CENTER_SIZE_HEIGHT_FIRST":
                (y1, x1, y2, x2) = (coords[0] - coords[2] / 2, coords[1] - coords[3] / 2, coords[0] + coords[2] / 2, coords[1] + coords[3] / 2)
            case "CENTER_SIZE_WIDTH_FIRST":
                (x1, y1, x2, y2) = (coords[0] - coords[2] / 2, coords[1] - coords[3] / 2, coords[0] + coords[2] / 2, coords[1] + coords[3] / 2)
            default: throw KernelError("crop_resize: box_coordinate_mode '\(boxMode)' is not one of CORNERS_HEIGHT_FIRST, CORNERS_WIDTH_FIRST, CENTER_SIZE_HEIGHT_FIRST, CENTER_SIZE_WIDTH_FIRST")
            }
            if normalized {
                y1 *= Double(h - 1); y2 *= Double(h - 1); x1 *= Double(w - 1); x2 *= Double(w - 1)
            }
            y1 *= spatial; y2 *= spatial; x1 *= spatial; x2 *= spatial
            let ys = boxGrid(m, y1, y2, th), xs = boxGrid(m, x1, x2, tw)
            let images = index.map { [$0] } ?? Array(0..<b)
            for img in images {
                guard img >= 0, img < b else { throw KernelError("crop_resize: box image index \(img) out of range 0..<\(b)") }
                for ch in 0..<c {
                    let base = (img * c + ch) * h * w
                    for yy in ys {
                        for xx in xs {
                            out.append(bilinear(src, base, h, w, yy, xx, pad: pad))
                        }
                    }
                }
            }
        }
        let shape = iOS17 ? [boxes.count, c, th, tw] : [boxes.count, imagesPerBox, c, th, tw]
        return [EW.floatResult(inv.outputDType(), shape, out)]
    }

    /// The sampling grid of `mode` over a box [a, b] (pixel coordinates, either order).
    static func boxGrid(_ mode: String, _ a: Double, _ b: Double, _ n: Int) -> [Double] {
        let span = b - a
        return (0..<n).map { i -> Double in
            let d = Double(i), nn = Double(n)
            switch mode {
            case "STRICT_ALIGN_CORNERS": return n == 1 ? a : a + d * span / (nn - 1)
            case "ALIGN_CORNERS": return n == 1 ? a + span / 2 : a + d * span / (nn - 1)
            case "UNALIGN_CORNERS": return a + (d + 0.5) * (span + 1) / nn - 0.5
            case "OFFSET_CORNERS":
                let delta = Swift.max(1, abs(span)) / nn * (span < 0 ? -1 : 1)
                return a + 0.5 * delta + d * delta
            default: return n == 1 ? a : a + d * (span + 1 - (span + 1) / nn) / (nn - 1)
            }
        }
    }

    /// Bilinear sample of plane `base` at (y, x); outside [0, H−1]×[0, W−1] → `pad`.
    @inline(__always)
    static func bilinear(_ src: [Float], _ base: Int, _ h: Int, _ w: Int, _ y: Double, _ x: Double, pad: Float) -> Float {
        guard y >= -1e-6, x >= -1e-6, y <= Double(h - 1) + 1e-6, x <= Double(w - 1) + 1e-6, h > 0, w > 0 else { return pad }
        let yc = Swift.min(Swift.max(y, 0), Double(h - 1)), xc = Swift.min(Swift.max(x, 0), Double(w - 1))
        let y0 = Int(yc.rounded(.down)), x0 = Int(xc.rounded(.down))
        let y1 = Swift.min(y0 + 1, h - 1), x1 = Swift.min(x0 + 1, w - 1)
        let fy = Float(yc - Double(y0)), fx = Float(xc - Double(x0))
        let a = src[base + y0 * w + x0], b = src[base + y0 * w + x1], c = src[base + y1 * w + x0], d = src[base + y1 * w + x1]
        let top = a + (b - a) * fx, bottom = c + (d - c) * fx
        return top + (bottom - top) * fy
    }

    // MARK: - resample / affine

    /// `resample(x [B, C, H, W], coordinates [B, H2, W2, 2] (x, y), sampling_mode, padding_mode,
    /// padding_value, coordinates_mode, align_corners)` → [B, C, H2, W2] (torch's `grid_sample`):
    /// - `coordinates_mode`: `unnormalized` (pixels), `normalized_minus_one_to_one`,
    ///   `normalized_zero_to_one`; a normalized coordinate maps to pixels as
    ///   `(u + 1)/2 · (size − 1)` with `align_corners`, else `((u + 1)·size − 1)/2`;
    /// - `sampling_mode`: `bilinear` or `nearest` (round half to even, as torch);
    /// - `padding_mode`: `constant` (`padding_value` outside), `border` (clamp), `reflection`
    ///   (mirror without the edge, about the pixel centres with `align_corners`, else about the
    ///   image edges), `symmetric` (mirror with the edge).
    static func resample(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let coords = try inv.tensor("coordinates")
        guard x.rank == 4, coords.rank == 4, coords.shape[3] == 2, coords.shape[0] == x.shape[0] else {
            throw KernelError("resample: x must be [B, C, H, W] and coordinates [B, H2, W2, 2], have \(x.shape), \(coords.shape)")
        }
        let grid = coords.floats.map(Double.init)
        let (oh, ow) = (coords.shape[1], coords.shape[2])
        return [try sampleGrid(inv, x, oh: oh, ow: ow) { b, i, j in
            let k = ((b * oh + i) * ow + j) * 2
            return (grid[k], grid[k + 1])
        }]
    }

    /// `affine(x [B, C, H, W], transform_matrix [B or 1, 6], output_height, output_width, …)`:
    /// output pixel (w, h), in normalized [−1, 1] coordinates (align_corners: corner pixel centres
    /// at ±1), reads input point `x' = a0·w + a1·h + a2`, `y' = b0·w + b1·h + b2` with the
    /// `resample` rules.
    static func affine(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let m = try inv.tensor("transform_matrix")
        guard x.rank == 4, m.rank == 2, m.shape[1] == 6, m.shape[0] == 1 || m.shape[0] == x.shape[0] else {
            throw KernelError("affine: x must be [B, C, H, W] and transform_matrix [B or 1, 6], have \(x.shape), \(m.shape)")
        }
        let oh = try targetSize(try inv.int("output_height"), "output_height", "affine")
        let ow = try targetSize(try inv.int("output_width"), "output_width", "affine")
        let mv = m.floats.map(Double.init)
        let align = try inv.bool("align_corners", default: true)
        func norm(_ i: Int, _ n: Int) -> Double {
            if align { return n == 1 ? 0 : -1 + 2 * Double(i) / Double(n - 1) }
            return (2 * Double(i) + 1) / Double(n) - 1
        }
        return [try sampleGrid(inv, x, oh: oh, ow: ow) { b, i, j in
            let r = m.shape[0] == 1 ? 0 : b * 6
            let u = norm(j, ow), v = norm(i, oh)
            return (mv[r] * u + mv[r + 1] * v + mv[r + 2], mv[r + 3] * u + mv[r + 4] * v + mv[r + 5])
        }]
    }

    static func sampleGrid(_ inv: KernelInvocation, _ x: Tensor, oh: Int, ow: Int, _ point: (Int, Int, Int) -> (Double, Double)) throws -> RuntimeValue {
        let (b, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
        let sampling = try inv.string("sampling_mode").lowercased()
        let padding = try inv.string("padding_mode").lowercased()
        let cmode = try inv.string("coordinates_mode").lowercased()
        let align = try inv.bool("align_corners", default: true)
        let padValue = try inv.float("padding_value", default: 0)
        guard ["bilinear", "nearest"].contains(sampling) else { throw KernelError("\(inv.op.type): sampling_mode '\(sampling)' is not bilinear or nearest") }
        guard ["constant", "border", "reflection", "symmetric"].contains(padding) else {
            throw KernelError("\(inv.op.type): padding_mode '\(padding)' is not constant, border, reflection or symmetric")
        }
        guard ["unnormalized", "normalized_minus_one_to_one", "normalized_zero_to_one"].contains(cmode) else {
            throw KernelError("\(inv.op.type): coordinates_mode '\(cmode)' is not unnormalized, normalized_minus_one_to_one or normalized_zero_to_one")
        }
        func toPixel(_ u: Double, _ n: Int) -> Double {
            switch cmode {
            case "unnormalized": return u
            case "normalized_zero_to_one":
                let v = 2 * u - 1
                return align ? (v + 1) / 2 * Double(n - 1) : ((v + 1) * Double(n) - 1) / 2
            default: return align ? (u + 1) / 2 * Double(n - 1) : ((u + 1) * Double(n) - 1) / 2
            }
        }
        /// Maps an index outside 0..<n into it (nil: constant padding).
        func fold(_ i: Int, _ n: Int) -> Int? {
            if i >= 0 && i < n { return i }
            switch padding {
            case "border": return Swift.min(Swift.max(i, 0), n - 1)
            case "symmetric":
                let p = 2 * n
                var k = ((i % p) + p) % p
                if k >= n { k = p - 1 - k }
                return k
            case "reflection":
                if n == 1 { return 0 }
                let p = 2 * (n - 1)
                var k = ((i % p) + p) % p
                if k >= n { k = p - k }
                return k
            default: return nil
            }
        }
        /// Reflection of a continuous coordinate (torch grid_sample's reflect_coordinates).
        func reflect(_ v: Double, _ n: Int) -> Double {
            let (lo, hi) = align ? (0.0, Double(n - 1)) : (-0.5, Double(n) - 0.5)
            if hi <= lo { return 0 }
            let span = hi - lo
            var d = abs(v - lo)
            let flips = (d / span).rounded(.down)
            d -= flips * span
            return Int(flips) % 2 == 0 ? lo + d : hi - d
        }
        func symmetric(_ v: Double, _ n: Int) -> Double {
            // mirror including the edge: about −0.5 and n − 0.5
            let lo = -0.5, span = Double(n)
            var d = abs(v - lo)
            let flips = (d / span).rounded(.down)
            d -= flips * span
            return Int(flips) % 2 == 0 ? lo + d : lo + span - d
        }
        let src = x.floats
        var out = [Float](repeating: 0, count: b * c * oh * ow)
        for bi in 0..<b {
            for i in 0..<oh {
                for j in 0..<ow {
                    let (u, v) = point(bi, i, j)
                    var px = toPixel(u, w), py = toPixel(v, h)
                    switch padding {
                    case "border":
                        px = Swift.min(Swift.max(px, 0), Double(w - 1)); py = Swift.min(Swift.max(py, 0), Double(h - 1))
                    case "reflection":
                        px = Swift.min(Swift.max(reflect(px, w), 0), Double(w - 1)); py = Swift.min(Swift.max(reflect(py, h), 0), Double(h - 1))
                    case "symmetric":
                        px = symmetric(px, w); py = symmetric(py, h)
                    default: break
                    }
                    for ch in 0..<c {
                        let base = (bi * c + ch) * h * w
                        func at(_ yy: Int, _ xx: Int) -> Float {
                            guard let fy = fold(yy, h), let fx = fold(xx, w) else { return padValue }
                            return src[base + fy * w + fx]
                        }
                        let value: Float
                        if sampling == "nearest" {
                            value = at(Int(py.rounded(.toNearestOrEven)), Int(px.rounded(.toNearestOrEven)))
                        } else {
                            let x0 = Int(px.rounded(.down)), y0 = Int(py.rounded(.down))
                            let fx = Float(px - Double(x0)), fy = Float(py - Double(y0))
                            let a = at(y0, x0), bb = at(y0, x0 + 1), cc = at(y0 + 1, x0), d = at(y0 + 1, x0 + 1)
                            value = (a * (1 - fx) + bb * fx) * (1 - fy) + (cc * (1 - fx) + d * fx) * fy
                        }
                        out[((bi * c + ch) * oh + i) * ow + j] = value
                    }
                }
            }
        }
        return EW.floatResult(inv.outputDType(), [b, c, oh, ow], out)
    }
}
