import GraphIR
import Interpreter

/// `clamp_fp16_constants`: constants that end up in fp16 but lie beyond its range — an fp16
/// constant holding ±inf, or an fp32/fp64 constant (a `-1e9` / `-3.4e38` attention mask) feeding
/// an op with an fp16 output (typically `cast(dtype = "fp16")`) — become ±inf on an fp16 backend;
/// `inf - inf` and fully masked softmax rows then give NaN. The pass clamps them:
///
/// - in an **additive mask** (the constant reaches an `add`, `sub` or `select`, directly or
///   through `cast` / reshapes / `tile` / slices): values below −65504 (and −inf) become **−1e4**,
///   the mask value of forge-ir's LLM contract. `exp(−1e4 − max)` is exactly 0 in fp16 and fp32,
///   so the softmax is unchanged, and unlike −65504 it leaves headroom: `score − 1e4` or two
///   masks added stay finite;
/// - anywhere else: to **±65504** (fp16's largest finite value).
///
/// Values inside the range, NaN, the constant's dtype and shape are kept; in fp32 the clamped
/// mask gives the same softmax (the masked weights are 0 either way).
///
/// Before:
/// ```
/// tensor<fp32, [1, 4]> mask = const()                 // [0, 0, -1e9, -1e9]
/// tensor<fp16, [1, 4]> mask_fp16 = cast(x = mask, dtype = "fp16")
/// tensor<fp16, [1, 4]> masked = add(x = x_fp16, y = mask_fp16)
/// ```
/// After:
/// ```
/// tensor<fp32, [1, 4]> mask = const()                 // [0, 0, -10000, -10000]
/// tensor<fp16, [1, 4]> mask_fp16 = cast(x = mask, dtype = "fp16")
/// tensor<fp16, [1, 4]> masked = add(x = x_fp16, y = mask_fp16)
/// ```
/// Constants with more than 2^22 elements (weights) are not inspected.
public struct ClampFP16Constants: OpRewritePass {
    public static let info = PassInfo("clamp_fp16_constants", "Clamp constants beyond the fp16 range that reach fp16 ops (additive masks to -1e4, others to ±65504).")
    public init() {}

    public static let fp16Max = 65504.0
    /// What an additive mask's out-of-range negative values become.
    public static let maskValue = -1e4
    static let maxElements = 1 << 22

    /// The first value of const `op` that is out of the fp16 range where it is used in fp16, or nil.
    public static func outOfRange(_ op: Op, uses: UseMap) -> Double? {
        guard op.type == "const", let v = op.outputs.first, let c = op.attribute("val"), let t = c.type.tensorType,
              let n = t.elementCount, n <= maxElements else { return nil }
        // ±inf as a `clip` bound means "no bound" (torch's clamp(min=…) converts so): harmless.
        let users = uses.users(of: v)
        if !users.isEmpty, users.allSatisfy({ u in
            u.type == "clip" && u.inputs.allSatisfy { i in i.name == "alpha" || i.name == "beta" || !i.operands.contains { $0.value === v } }
        }) { return nil }
        switch t.dtype {
        case .fp16:
            return c.doubles()?.first { $0.isInfinite }
        case .fp32, .fp64:
            guard uses.users(of: v).contains(where: { u in u.outputs.contains { $0.type.tensorType?.dtype == .fp16 } }) else { return nil }
            return c.doubles()?.first { abs($0) > fp16Max }
        default:
            return nil
        }
    }

    /// Whether `v` reaches an `add`, `sub` or `select` through shape-preserving / reshaping ops.
    static func isAdditiveMask(_ v: Value, uses: UseMap) -> Bool {
        let through: Set<String> = ["cast", "reshape", "expand_dims", "squeeze", "tile", "transpose", "slice_by_index",
                                    "slice_by_size", "identity", "broadcast_to"]
        var frontier = [v]
        for _ in 0..<6 {
            var next: [Value] = []
            for x in frontier {
                for u in uses.users(of: x) {
                    if ["add", "sub", "select"].contains(u.type) { return true }
                    if through.contains(u.type) { next += u.outputs }
                }
            }
            if next.isEmpty { return false }
            frontier = next
        }
        return false
    }

    public static func isAnchor(_ op: Op) -> Bool { op.type == "const" }

    /// Reads `site.uses`: a clamp changes a constant's values, never who uses it.
    public func rewrite(_ op: Op, in site: RewriteSite) {
        guard Self.outOfRange(op, uses: site.uses) != nil, let v = op.outputs.first, let c = op.attribute("val"),
              let t = c.type.tensorType, var tensor = try? ConstConversion.tensor(c),
              case var .float(values) = tensor.data else { return }
        let mask = Self.isAdditiveMask(v, uses: site.uses)
        var n = 0
        for i in values.indices where !values[i].isNaN && abs(Double(values[i])) > Self.fp16Max {
            values[i] = values[i] < 0 ? Float(mask ? Self.maskValue : -Self.fp16Max) : Float(Self.fp16Max)
            n += 1
        }
        tensor.data = .float(values)
        guard n > 0, let clamped = ConstEncoding.constValue(tensor, type: t) else { return }
        op.attributes = op.attributes.map { $0.name == "val" ? Attribute(name: "val", value: clamped) : $0 }
        site.count(mask ? "mask constants clamped" : "constants clamped")
        site.count("values clamped", n)
    }
}
