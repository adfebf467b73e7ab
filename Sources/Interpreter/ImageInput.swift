import GraphIR

/// Pixels for a Core ML image input (`ImageFeatureType`, coremltools' `ct.ImageType`).
///
/// In an ML Program the image input is a float tensor `[1, C, H, W]` of 0–255 pixel values
/// (C = 3 for RGB / BGR, 1 for grayscale); the `scale` / `bias` preprocessing are ops of the
/// function (coremltools inserts `mul` and `add`). Core ML makes that tensor from a pixel
/// buffer; here the pixels come as an array:
///
/// - `uint8 [H, W, 3]` RGB (what `numpy.asarray(PIL.Image)` gives, the image coremltools'
///   `predict` takes), or `uint8 [H, W]` / `[H, W, 1]` for a grayscale input: moved to
///   `[1, C, H, W]` in the input's dtype; for a `BGR` input the channels are reversed, as Core
///   ML converts an RGB image for a BGR model.
/// - any array already of the function input's shape `[1, C, H, W]`: used as it is.
public enum ImageInput {
    /// Core ML `ImageFeatureType.ColorSpace` values.
    static let grayscale: Int32 = 10, rgb: Int32 = 20, bgr: Int32 = 30, grayscaleFloat16: Int32 = 40

    /// `"RGB 64x64"`-style text of an image feature.
    public static func text(_ f: ImageFeature) -> String {
        "\(f.colorSpaceName) \(f.width)x\(f.height)"
    }

    /// `t` as the tensor the function input `input` takes (see the type's documentation).
    /// - Throws: ``InterpreterError/unsupported(_:)`` naming the input, the accepted forms and
    ///   what was given, when `t` is neither form.
    public static func functionInput(_ t: Tensor, feature: ImageFeature, input: Value) throws -> Tensor {
        guard let tt = input.type.tensorType, tt.shape.count == 4 else { return t }
        let shape = tt.shape
        let channels = shape[1].fixedValue ?? (feature.colorSpace == rgb || feature.colorSpace == bgr ? 3 : 1)
        if t.shape.count == 4 { return t }
        let hwc = t.shape.count == 2 ? t.shape + [1] : t.shape
        guard t.dtype == .uint8, hwc.count == 3, hwc[2] == channels,
              shape[2].fixedValue.map({ $0 == hwc[0] }) ?? true, shape[3].fixedValue.map({ $0 == hwc[1] }) ?? true else {
            let want = channels == 3 ? "uint8 [H, W, 3] RGB pixels" : "uint8 [H, W] pixels"
            throw InterpreterError.unsupported("image input '\(input.name)' (\(text(feature))) takes \(want) or the \(tt) tensor Core ML makes of them; got \(t.dtype.rawValue) \(t.shape)")
        }
        let (h, w) = (hwc[0], hwc[1])
        let src = t.floats
        var out = [Float](repeating: 0, count: channels * h * w)
        for c in 0..<channels {
            let from = feature.colorSpace == bgr ? channels - 1 - c : c
            for i in 0..<(h * w) { out[c * h * w + i] = src[i * channels + from] }
        }
        return Tensor(tt.dtype, shape: [1, channels, h, w], floats: out)
    }

    /// `inputs` with every image input of `description` converted by
    /// ``functionInput(_:feature:input:)``; other inputs unchanged.
    public static func convert(_ inputs: [String: Tensor], description: FunctionDescription, function: Function) throws -> [String: Tensor] {
        var out = inputs
        for d in description.inputs {
            guard case let .image(feature) = d.kind, let t = inputs[d.name],
                  let v = function.inputs.first(where: { $0.name == d.name }) else { continue }
            out[d.name] = try functionInput(t, feature: feature, input: v)
        }
        return out
    }
}
