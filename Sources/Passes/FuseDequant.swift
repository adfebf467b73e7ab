import GraphIR
import Interpreter

/// `fuse_dequant` (graph level, written back): every dequantization of constant data becomes
/// the one constexpr op that expresses it, so compressed weights stay compressed in the
/// written package. Numerically identical (the dequantized values are computed by the same
/// formula `scale * (data - offset)` on the same numbers) — except a fused fp16 → fp32 cast of
/// a blockwise op, which no longer rounds `scale * (data - offset)` to fp16 before widening
/// (exact whenever that product is an fp16 number; otherwise within half an fp16 ulp, and
/// closer to the real value).
///
/// Rewrites, applied to a fixed point by ``RewriteDriver``:
/// 1. `dequantize(input = const int8/uint8, scale, zero_point?, axis?)` of constants →
///    `constexpr_blockwise_shift_scale` (iOS18 functions; the scale and zero point are
///    reshaped to the data's rank, 1 everywhere but the axis — a type change only, same bytes
///    and same blob) or, before iOS18, `constexpr_affine_dequantize` (iOS16, attributes).
/// 2. iOS16 `constexpr_affine_dequantize` in an iOS18 function → `constexpr_blockwise_shift_scale`
///    with inline constant operands (iOS18 has no affine op).
///    In the blockwise form (1, 2) an all-zero zero point is dropped, a scalar scale or zero
///    point next to a vector one is repeated along its axis, and an integer zero point of
///    another dtype than the data becomes a float offset.
/// 3. `constexpr_cast(constexpr_blockwise_shift_scale(…))` (fp16 → fp32) → one blockwise op
///    whose scale is fp32; `constexpr_cast(constexpr_lut_to_dense(…))` → one lut op whose table
///    is fp32 (exact).
/// 4. `transpose` (constant `perm`) of a blockwise constant → its data, scale and offset
///    transposed (a new immediate, unless the permutation keeps the order of every non-1
///    axis: then only the types change). Only when the original has no other user, so that
///    no weight is stored twice.
/// 5. `reshape` / `expand_dims` / `squeeze` of a blockwise constant → the data and the scales
///    re-typed (same bytes), when the reshape only splits or merges axes without cutting a
///    block; otherwise it stays.
///
/// The dequantization axis and the block sizes always come from the shapes (block size along
/// axis k = data.shape[k] / scale.shape[k]; a `dequantize` / affine vector scale must match the
/// given `axis`, or the single axis of that length when none is given) — never assumed.
/// Zero and NaN scales of every dequantization left in the function are counted in the
/// statistics ("zero scales", "NaN scales"): such a weight block is all zeros or all NaN.
///
/// ```
/// before:
///   tensor<int8, [64, 32]> w_q = const()[val = tensor<int8, [64, 32]>(BLOBFILE(…, offset = 64))]
///   tensor<fp16, [64]> w_s = const()[val = tensor<fp16, [64]>(…)]
///   tensor<fp16, [64, 32]> w_deq = dequantize(input = w_q, scale = w_s, axis = 0)
///   tensor<fp16, [32, 64]> w = transpose(x = w_deq, perm = [1, 0])
///   tensor<fp16, [1, 64]> y = matmul(x = x, y = w)
/// after:
///   tensor<fp16, [32, 64]> w = constexpr_blockwise_shift_scale(data = tensor<int8, [32, 64]>([…]),
///                                                             scale = tensor<fp16, [1, 64]>(…))
///   tensor<fp16, [1, 64]> y = matmul(x = x, y = w)
/// ```
public struct FuseDequant: FunctionPass {
    public static let info = PassInfo("fuse_dequant", "Fold dequantize of constants, constexpr chains and transposes/reshapes of compressed weights into one constexpr op.")
    public init() {}

    public func run(on function: Function, in model: Model) throws -> PassResult {
        let counts = Counts()
        let iOS18 = (Opset.iosVersion(function.opset) ?? 0) >= 18
        var patterns: [RewritePattern] = [
            { op, ctx in Self.fuseDequantize(op, ctx, iOS18: iOS18, counts) },
            { op, ctx in Self.fuseCast(op, ctx, counts) },
            { op, ctx in Self.foldTranspose(op, ctx, counts) },
            { op, ctx in Self.foldReshape(op, ctx, counts) },
        ]
        if iOS18 { patterns.insert({ op, ctx in Self.convertAffine(op, ctx, counts) }, at: 1) }
        try RewriteDriver.run(function, in: model, patterns: patterns)
        var result = PassResult()
        for (k, v) in counts.values { result.count(k, v) }
        // A report, not a change.
        let scales = Self.scaleReport(function)
        if scales.zero > 0 { result.statistics["zero scales"] = scales.zero }
        if scales.nan > 0 { result.statistics["NaN scales"] = scales.nan }
        return result
    }

    final class Counts {
        var values: [String: Int] = [:]
        func add(_ k: String) { values[k, default: 0] += 1 }
    }

    // MARK: The compressed form

    /// `scale * (data - offset)` with scale and offset of the data's rank (block sizes
    /// data.shape / scale.shape): the operands of a `constexpr_blockwise_shift_scale`.
    struct Blockwise {
        var data: ConstValue
        var scale: ConstValue
        var offset: ConstValue?

        var dataType: TensorType? { data.type.tensorType }
        var scaleShape: [Int]? { scale.type.tensorType?.fixedShape }

        /// The operands of `op` when it is a blockwise op whose inputs are all constants.
        init?(_ op: Op) {
            guard op.type == "constexpr_blockwise_shift_scale",
                  let d = Consts.value(op, "data"), let s = Consts.value(op, "scale") else { return nil }
            var o: ConstValue?
            if op.input("offset") != nil {
                guard let ov = Consts.value(op, "offset") else { return nil }
                o = ov
            }
            guard let dt = d.type.tensorType, let ds = dt.fixedShape, let ss = s.type.tensorType?.fixedShape, ds.count == ss.count,
                  zip(ds, ss).allSatisfy({ $1 > 0 && $0 % $1 == 0 }) else { return nil }
            if let o, o.type.tensorType?.fixedShape != ss { return nil }
            data = d; scale = s; offset = o
        }

        init(data: ConstValue, scale: ConstValue, offset: ConstValue?) {
            self.data = data; self.scale = scale; self.offset = offset
        }

        /// A new `constexpr_blockwise_shift_scale` with inline operands (the iOS18 form).
        func op(name: String, output: String) -> Op? {
            guard let dt = dataType, let st = scale.type.tensorType else { return nil }
            var inputs = [OpInput(name: "data", operands: [.constant(data)]), OpInput(name: "scale", operands: [.constant(scale)])]
            if let offset { inputs.append(OpInput(name: "offset", operands: [.constant(offset)])) }
            return Op(type: "constexpr_blockwise_shift_scale", inputs: inputs,
                      outputs: [Value(name: output, type: .tensor(TensorType(st.dtype, dt.shape)))],
                      attributes: [Attribute(name: "name", value: .string(name))])
        }
    }

    /// True when `new` can stand for `old`'s value: same dtype, same rank, every fixed
    /// dimension of `old` the same.
    static func compatible(_ new: Op, _ old: Op) -> Bool {
        guard let a = new.outputs.first?.type.tensorType, let b = old.outputs.first?.type.tensorType,
              a.dtype == b.dtype, a.rank == b.rank else { return false }
        return zip(a.shape, b.shape).allSatisfy { n, o in o.fixedValue == nil || n == o }
    }

    /// Replaces `old` (one output) by `new`, which takes its name and output name.
    static func replace(_ old: Op, with new: Op, _ ctx: RewriteContext) {
        ctx.insert(new, before: old)
        ctx.replaceAllUses(of: old.outputs[0], with: new.outputs[0])
        ctx.erase(old)
        new.outputs[0].name = old.outputs[0].name
        if let i = new.attributes.firstIndex(where: { $0.name == "name" }) { new.attributes[i].value = .string(old.name) }
    }

    /// Erases the compressed `source` when nothing reads it any more.
    static func eraseIfUnused(_ source: Op, _ ctx: RewriteContext) {
        guard source.parent != nil, !UseMap(ctx.function).isUsed(source.outputs[0]) else { return }
        ctx.erase(source)
    }

    static func isUsedElsewhere(_ source: Op, than user: Op, _ ctx: RewriteContext) -> Bool {
        let uses = UseMap(ctx.function)
        return uses.isReturned(source.outputs[0]) || uses.users(of: source.outputs[0]).contains { $0 !== user }
    }

    // MARK: 1. dequantize(const) → constexpr

    /// The scale / zero point of a `dequantize` or `constexpr_affine_dequantize` (scalar or
    /// vector) as a tensor of the data's rank: 1 everywhere, or the vector's length at the axis.
    /// The axis is `axis` when given (its length must match), else the one axis of that length.
    static func perAxisShape(_ p: ConstValue, data: [Int], axis: Int?) -> [Int]? {
        guard let t = p.type.tensorType, let shape = t.fixedShape, shape.count <= 1 else { return nil }
        let n = shape.first ?? 1
        var out = [Int](repeating: 1, count: data.count)
        if n == 1 { return out }
        var a: Int
        if let axis {
            a = axis < 0 ? axis + data.count : axis
            guard a >= 0, a < data.count, data[a] == n else { return nil }
        } else {
            let candidates = data.indices.filter { data[$0] == n }
            guard candidates.count == 1 else { return nil }
            a = candidates[0]
        }
        out[a] = n
        return out
    }

    static func fuseDequantize(_ op: Op, _ ctx: RewriteContext, iOS18: Bool, _ counts: Counts) -> Bool {
        guard op.type == "dequantize", op.outputs.count == 1, let out = op.outputs[0].type.tensorType,
              let data = Consts.value(op, "input"), let dt = data.type.tensorType, dt.dtype == .int8 || dt.dtype == .uint8,
              let shape = dt.fixedShape, !shape.isEmpty,
              let scale = Consts.value(op, "scale"), let st = scale.type.tensorType, st.dtype == .fp16 || st.dtype == .fp32,
              out.dtype == st.dtype else { return false }
        var zp: ConstValue?
        if op.input("zero_point") != nil {
            guard let z = Consts.value(op, "zero_point"), z.type.tensorType?.dtype == dt.dtype else { return false }
            zp = z
        }
        var axis: Int?
        if op.input("axis") != nil {
            guard let a = Consts.value(op, "axis")?.ints()?.first else { return false }
            axis = a
        }
        if !iOS18 {
            // Before iOS18: constexpr_affine_dequantize takes the same scalar/vector parameters.
            guard (Opset.iosVersion(ctx.function.opset) ?? 0) >= 16,
                  let sShape = perAxisShape(scale, data: shape, axis: axis) else { return false }
            var zShape = sShape
            if let z = zp {
                guard let zs = perAxisShape(z, data: shape, axis: axis) else { return false }
                zShape = zs
            }
            let vectorAxes = Set(shape.indices.filter { sShape[$0] != 1 || zShape[$0] != 1 })
            guard vectorAxes.count <= 1 else { return false }
            let a = vectorAxes.first ?? axis.map { $0 < 0 ? $0 + shape.count : $0 } ?? 0
            let zeroPoint = zp ?? ConstValue(type: .scalar(dt.dtype), payload: .tensor(.bytes([0])))
            let new = Op(type: "constexpr_affine_dequantize", outputs: [Value(name: ctx.names.fresh(op.name + "_affine"), type: .tensor(TensorType(st.dtype, dt.shape)))],
                         attributes: [Attribute(name: "name", value: .string(op.name)), Attribute(name: "quantized_data", value: data),
                                      Attribute(name: "scale", value: scale), Attribute(name: "zero_point", value: zeroPoint),
                                      Attribute(name: "axis", value: .int32(Int32(a)))])
            guard compatible(new, op) else { return false }
            replace(op, with: new, ctx)
            counts.add("dequantize fused")
            return true
        }
        guard let b = blockwise(data: data, scale: scale, zeroPoint: zp, axis: axis),
              let new = b.op(name: op.name, output: ctx.names.fresh(op.name + "_fused")), compatible(new, op) else { return false }
        replace(op, with: new, ctx)
        counts.add("dequantize fused")
        return true
    }

    /// A per-tensor / per-axis dequantization (`dequantize`, `constexpr_affine_dequantize`:
    /// scalar or vector scale and zero point) in blockwise form: scale and offset of the data's
    /// rank and of one shape (a scalar one is repeated along the other's axis; a type change
    /// otherwise), an all-zero zero point dropped, an integer zero point of another dtype than
    /// the data stored as a float offset in the scale's dtype.
    static func blockwise(data: ConstValue, scale: ConstValue, zeroPoint: ConstValue?, axis: Int?) -> Blockwise? {
        guard let dt = data.type.tensorType, let shape = dt.fixedShape, let st = scale.type.tensorType,
              let sShape = perAxisShape(scale, data: shape, axis: axis) else { return nil }
        var zp = zeroPoint
        if let z = zp, Consts.isAllZero(z) { zp = nil }
        var blockShape = sShape
        var zShape: [Int]?
        if let z = zp {
            guard let zs = perAxisShape(z, data: shape, axis: axis) else { return nil }
            zShape = zs
            blockShape = zip(sShape, zs).map { max($0, $1) }
        }
        // Scale and zero point along different axes (possible only when the axis is inferred).
        guard blockShape.filter({ $0 != 1 }).count <= 1,
              let s = sShape == blockShape ? Consts.retyped(scale, shape: blockShape) : Consts.broadcast(scale, to: blockShape)
        else { return nil }
        var offset: ConstValue?
        if var z = zp, let zs = zShape, let zt = z.type.tensorType {
            if zt.dtype != dt.dtype && !zt.dtype.isFloat || zt.dtype == .fp64 {
                guard let v = z.doubles(), let f = Consts.encode(v.map(Float.init), type: TensorType(st.dtype, zt.shape)) else { return nil }
                z = f
            }
            guard let o = zs == blockShape ? Consts.retyped(z, shape: blockShape) : Consts.broadcast(z, to: blockShape) else { return nil }
            offset = o
        }
        return Blockwise(data: data, scale: s, offset: offset)
    }

    // MARK: 2. constexpr_affine_dequantize → constexpr_blockwise_shift_scale (iOS18)

    static func convertAffine(_ op: Op, _ ctx: RewriteContext, _ counts: Counts) -> Bool {
        guard op.type == "constexpr_affine_dequantize", op.outputs.count == 1,
              let data = Consts.value(op, "quantized_data"), let dt = data.type.tensorType, dt.dtype == .int8 || dt.dtype == .uint8,
              let shape = dt.fixedShape, !shape.isEmpty,
              let scale = Consts.value(op, "scale"), let st = scale.type.tensorType, st.dtype == .fp16 || st.dtype == .fp32,
              let zp = Consts.value(op, "zero_point") else { return false }
        let axis = Consts.value(op, "axis")?.ints()?.first
        guard let b = blockwise(data: data, scale: scale, zeroPoint: zp, axis: axis),
              let new = b.op(name: op.name, output: ctx.names.fresh(op.name + "_blockwise")), compatible(new, op) else { return false }
        replace(op, with: new, ctx)
        counts.add("affine dequantize converted")
        return true
    }

    // MARK: 3. constexpr_cast chains

    static func fuseCast(_ op: Op, _ ctx: RewriteContext, _ counts: Counts) -> Bool {
        guard op.type == "constexpr_cast", op.outputs.count == 1, let target = op.outputs[0].type.tensorType?.dtype,
              target == .fp32, let src = op.operand("source_val")?.value, src.type.tensorType?.dtype == .fp16,
              let source = src.producer else { return false }
        switch source.type {
        case "constexpr_blockwise_shift_scale":
            guard var b = Blockwise(source), let st = b.scale.type.tensorType, let v = b.scale.doubles(),
                  let scale = Consts.encode(v.map(Float.init), type: TensorType(target, st.shape)) else { return false }
            b.scale = scale
            guard let new = b.op(name: op.name, output: ctx.names.fresh(op.name + "_fused")), compatible(new, op) else { return false }
            replace(op, with: new, ctx)
        case "constexpr_lut_to_dense":
            // The table holds the output values; converting it is exact for fp16 → fp32.
            let lutOperand = source.operand("lut")
            guard let lut = lutOperand.flatMap({ Consts.value($0) }) ?? source.attribute("lut"), let lt = lut.type.tensorType, lt.dtype.isFloat,
                  let v = lut.doubles(), let newLut = Consts.encode(v.map(Float.init), type: TensorType(target, lt.shape)),
                  let outType = source.outputs.first?.type.tensorType else { return false }
            var inputs = source.inputs
            var attributes = source.attributes
            if let i = inputs.firstIndex(where: { $0.name == "lut" }) {
                inputs[i].operands = [.constant(newLut)]
            } else if let i = attributes.firstIndex(where: { $0.name == "lut" }) {
                attributes[i].value = newLut
            } else { return false }
            // Other operands bound to const ops become inline values as well.
            for i in inputs.indices {
                inputs[i].operands = inputs[i].operands.map { o in o.value.flatMap { Consts.value(.value($0)) }.map { .constant($0) } ?? o }
            }
            let new = Op(type: source.type, inputs: inputs, outputs: [Value(name: ctx.names.fresh(op.name + "_fused"), type: .tensor(TensorType(target, outType.shape)))],
                         attributes: attributes)
            guard compatible(new, op) else { return false }
            replace(op, with: new, ctx)
        default:
            return false
        }
        eraseIfUnused(source, ctx)
        counts.add("casts fused")
        return true
    }

    // MARK: 4. transpose of a compressed constant

    static func foldTranspose(_ op: Op, _ ctx: RewriteContext, _ counts: Counts) -> Bool {
        guard op.type == "transpose", let x = op.operand("x")?.value, let source = x.producer, let b = Blockwise(source),
              let perm = Consts.value(op, "perm")?.ints(), let dt = b.dataType, let shape = dt.fixedShape, let sShape = b.scaleShape,
              perm.count == shape.count else { return false }
        let p = perm.map { $0 < 0 ? $0 + shape.count : $0 }
        guard Set(p) == Set(0..<shape.count) else { return false }
        let copies = !Consts.permutationIsRetype(shape, p)
        // A copy while the original stays in use would store the weight twice.
        if copies && isUsedElsewhere(source, than: op, ctx) { return false }
        guard let data = Consts.transposed(b.data, shape: shape, perm: p),
              let scale = Consts.transposed(b.scale, shape: sShape, perm: p) else { return false }
        var offset: ConstValue?
        if let o = b.offset {
            guard let t = Consts.transposed(o, shape: sShape, perm: p) else { return false }
            offset = t
        }
        let folded = Blockwise(data: data, scale: scale, offset: offset)
        guard let new = folded.op(name: op.name, output: ctx.names.fresh(op.name + "_fused")), compatible(new, op) else { return false }
        replace(op, with: new, ctx)
        eraseIfUnused(source, ctx)
        counts.add("transposes folded")
        return true
    }

    // MARK: 5. reshape of a compressed constant

    static func foldReshape(_ op: Op, _ ctx: RewriteContext, _ counts: Counts) -> Bool {
        guard ["reshape", "expand_dims", "squeeze"].contains(op.type), let x = op.operand("x")?.value, let source = x.producer,
              let b = Blockwise(source), let dt = b.dataType, let shape = dt.fixedShape, let sShape = b.scaleShape,
              let newShape = op.outputs[0].type.tensorType?.fixedShape, !newShape.isEmpty,
              newShape.reduce(1, *) == shape.reduce(1, *),
              let newScaleShape = reshapedScaleShape(data: shape, scale: sShape, to: newShape) else { return false }
        let folded = Blockwise(data: Consts.retyped(b.data, shape: newShape), scale: Consts.retyped(b.scale, shape: newScaleShape),
                               offset: b.offset.map { Consts.retyped($0, shape: newScaleShape) })
        guard let new = folded.op(name: op.name, output: ctx.names.fresh(op.name + "_fused")), compatible(new, op) else { return false }
        replace(op, with: new, ctx)
        eraseIfUnused(source, ctx)
        counts.add("reshapes folded")
        return true
    }

    /// The scale shape of a blockwise constant of shape `data` / scales `scale` reshaped to
    /// `newShape` (row-major, same bytes), or nil when a block would be cut: axes are grouped
    /// into the smallest runs with equal products; each run must merge into one axis with a
    /// single block size (axes before the blocked one per-element, axes after it whole) and
    /// split into the new axes the same way. The scales keep their bytes too.
    static func reshapedScaleShape(data: [Int], scale: [Int], to newShape: [Int]) -> [Int]? {
        guard data.count == scale.count, !data.contains(0), !newShape.contains(0) else { return nil }
        // Size-1 axes carry one block of size 1: drop them, give new ones scale 1.
        let old = data.indices.filter { data[$0] != 1 }
        let d = old.map { data[$0] }, blocks = old.map { data[$0] / scale[$0] }
        let newAxes = newShape.indices.filter { newShape[$0] != 1 }
        let e = newAxes.map { newShape[$0] }
        var newScale = [Int](repeating: 1, count: newShape.count)
        var i = 0, j = 0
        while i < d.count || j < e.count {
            guard i < d.count, j < e.count else { return nil }
            var gOld = [i], gNew = [j]
            var pOld = d[i], pNew = e[j]
            i += 1; j += 1
            while pOld != pNew {
                if pOld < pNew {
                    guard i < d.count else { return nil }
                    gOld.append(i); pOld *= d[i]; i += 1
                } else {
                    guard j < e.count else { return nil }
                    gNew.append(j); pNew *= e[j]; j += 1
                }
            }
            // Merge the old run: b = b_t · (sizes after t), where t is the first blocked axis.
            let t = gOld.firstIndex { blocks[$0] != 1 } ?? gOld.count - 1
            for k in gOld[(t + 1)...] where blocks[k] != d[k] { return nil }
            let block = blocks[gOld[t]] * gOld[(t + 1)...].reduce(1) { $0 * d[$1] }
            // Split it into the new run: trailing axes whole, one axis partly, leading per-element.
            var inner = 1
            var k = gNew.count - 1
            while k >= 0 && block % (inner * e[gNew[k]]) == 0 { inner *= e[gNew[k]]; k -= 1 }
            if k >= 0 {
                let partial = block / inner
                guard block % inner == 0, e[gNew[k]] % partial == 0 else { return nil }
                newScale[newAxes[gNew[k]]] = e[gNew[k]] / partial
                for m in 0..<k { newScale[newAxes[gNew[m]]] = e[gNew[m]] }
            } else {
                guard block == inner else { return nil }
            }
        }
        return newScale
    }

    // MARK: Scale report

    /// Zero and NaN scale elements of every dequantization in `function`.
    public static func scaleReport(_ function: Function) -> (zero: Int, nan: Int) {
        var zero = 0, nan = 0
        function.body.walk { op in
            guard ["constexpr_blockwise_shift_scale", "constexpr_affine_dequantize", "dequantize"].contains(op.type),
                  let s = Consts.value(op, "scale"), let v = s.doubles() else { return }
            for x in v {
                if x == 0 { zero += 1 } else if x.isNaN { nan += 1 }
            }
        }
        return (zero, nan)
    }
}

/// Constant-value helpers of `fuse_dequant`: reading operands, re-typing, re-encoding and
/// permuting the stored elements of tensor constants (any dtype, sub-byte types included).
enum Consts {
    /// The constant bound to input `name` of `op`: an inline value, a `const` op's value, or
    /// (iOS16 constexpr ops) the attribute of that name.
    static func value(_ op: Op, _ name: String) -> ConstValue? {
        if let o = op.operand(name) { return value(o) }
        if op.input(name) == nil, let a = op.attribute(name), name != "name" { return a }
        return nil
    }

    static func value(_ o: Operand) -> ConstValue? {
        switch o {
        case let .constant(c): return c
        case let .value(v):
            guard let p = v.producer, p.type == "const" else { return nil }
            return p.constValue
        }
    }

    static func isAllZero(_ c: ConstValue) -> Bool { c.doubles()?.allSatisfy { $0 == 0 } ?? false }

    /// The same stored elements under a new shape (a blob keeps its reference: no copy).
    static func retyped(_ c: ConstValue, shape: [Int]) -> ConstValue {
        guard let t = c.type.tensorType else { return c }
        return ConstValue(type: .tensor(TensorType(t.dtype, fixed: shape)), payload: c.payload, docString: c.docString)
    }

    /// A scalar (or length-1) constant repeated to `shape`.
    static func broadcast(_ c: ConstValue, to shape: [Int]) -> ConstValue? {
        guard let t = c.type.tensorType, t.elementCount == 1, let raw = rawBytes(c), let codes = unpack(raw, t.dtype, count: 1) else { return nil }
        let n = shape.reduce(1, *)
        return constValue(pack([UInt32](repeating: codes[0], count: n), t.dtype), TensorType(t.dtype, fixed: shape))
    }

    /// Floats stored as `type` (fp16 rounded to nearest even, fp32 exact).
    static func encode(_ v: [Float], type: TensorType) -> ConstValue? {
        switch type.dtype {
        case .fp32: return ConstValue(type: .tensor(type), payload: .tensor(.floats(v)))
        case .fp16:
            var bytes: [UInt8] = []
            bytes.reserveCapacity(2 * v.count)
            for f in v { let h = Half.fromFloat(f); bytes.append(UInt8(h & 0xFF)); bytes.append(UInt8(h >> 8)) }
            return ConstValue(type: .tensor(type), payload: .tensor(.bytes(bytes)))
        default: return nil
        }
    }

    /// True when permuting the axes of `shape` by `perm` keeps the row-major element order
    /// (every axis longer than 1 stays in order), so a transpose is only a type change.
    static func permutationIsRetype(_ shape: [Int], _ perm: [Int]) -> Bool {
        let moved = perm.filter { shape[$0] != 1 }
        return moved == moved.sorted()
    }

    /// `c` (of shape `shape`) with its axes permuted: `out.shape[k] = shape[perm[k]]`.
    static func transposed(_ c: ConstValue, shape: [Int], perm: [Int]) -> ConstValue? {
        let outShape = perm.map { shape[$0] }
        if permutationIsRetype(shape, perm) { return retyped(c, shape: outShape) }
        guard let t = c.type.tensorType, let raw = rawBytes(c) else { return nil }
        let n = shape.reduce(1, *)
        let strides = contiguous(shape)
        let srcStrides = perm.map { strides[$0] }
        // Walk the output in row-major order with an odometer over the permuted strides.
        var order = [Int](repeating: 0, count: n)
        var cursor = StridedCursor(shape: outShape, a: srcStrides)
        for o in 0..<n {
            order[o] = cursor.offsetA
            cursor.step()
        }
        let type = TensorType(t.dtype, fixed: outShape)
        if !t.dtype.isSubByte {
            let w = t.dtype.bitWidth / 8
            guard w > 0, raw.count >= n * w else { return nil }
            var out = [UInt8](repeating: 0, count: n * w)
            raw.withUnsafeBufferPointer { r in
                out.withUnsafeMutableBufferPointer { o in
                    for i in 0..<n { for b in 0..<w { o[i * w + b] = r[order[i] * w + b] } }
                }
            }
            return constValue(out, type)
        }
        guard let codes = unpack(raw, t.dtype, count: n) else { return nil }
        return constValue(pack(order.map { codes[$0] }, t.dtype), type)
    }

    static func contiguous(_ shape: [Int]) -> [Int] {
        var s = [Int](repeating: 1, count: shape.count)
        var acc = 1
        for k in shape.indices.reversed() { s[k] = acc; acc *= shape[k] }
        return s
    }

    /// The little-endian element bytes of a tensor constant (sub-byte types packed LSB first).
    static func rawBytes(_ c: ConstValue) -> [UInt8]? {
        guard let t = c.type.tensorType, let n = t.elementCount else { return nil }
        let size = t.dtype.byteCount(elements: n)
        switch c.payload {
        case let .blob(ref):
            guard let b = try? ref.bytes(), b.count >= size else { return nil }
            return Array(b.prefix(size))
        case .tensor(.bytes(let b)):
            return b.count == size ? b : nil
        case .tensor:
            guard let v = c.doubles() else { return nil }
            var out: [UInt8] = []
            out.reserveCapacity(size)
            switch t.dtype {
            case .fp32: for x in v { withUnsafeBytes(of: Float(x).bitPattern.littleEndian) { out += $0 } }
            case .fp16: for x in v { let h = Half.fromFloat(Float(x)); out += [UInt8(h & 0xFF), UInt8(h >> 8)] }
            case .int8, .uint8, .bool: for x in v { out.append(UInt8(truncatingIfNeeded: Int(x))) }
            case .int16, .uint16: for x in v { withUnsafeBytes(of: UInt16(truncatingIfNeeded: Int(x)).littleEndian) { out += $0 } }
            case .int32, .uint32: for x in v { withUnsafeBytes(of: UInt32(truncatingIfNeeded: Int(x)).littleEndian) { out += $0 } }
            default:
                guard t.dtype.isSubByte else { return nil }
                let mask = (1 << t.dtype.bitWidth) - 1
                return pack(v.map { UInt32(Int($0) & mask) }, t.dtype)
            }
            return out
        default:
            return nil
        }
    }

    /// Element codes (bit patterns) of `count` elements.
    static func unpack(_ raw: [UInt8], _ dtype: DType, count: Int) -> [UInt32]? {
        let bits = dtype.bitWidth
        guard bits > 0, raw.count >= dtype.byteCount(elements: count) else { return nil }
        if bits >= 8 {
            let w = bits / 8
            return (0..<count).map { i in (0..<w).reduce(UInt32(0)) { $0 | UInt32(raw[i * w + $1]) << (8 * $1) } }
        }
        return (0..<count).map { i in
            var v: UInt32 = 0
            for b in 0..<bits {
                let bit = i * bits + b
                if raw[bit >> 3] & (1 << UInt8(bit & 7)) != 0 { v |= 1 << UInt32(b) }
            }
            return v
        }
    }

    static func pack(_ codes: [UInt32], _ dtype: DType) -> [UInt8] {
        let bits = dtype.bitWidth
        if bits >= 8 {
            let w = bits / 8
            var out = [UInt8](repeating: 0, count: codes.count * w)
            for (i, c) in codes.enumerated() { for b in 0..<w { out[i * w + b] = UInt8(truncatingIfNeeded: c >> (8 * b)) } }
            return out
        }
        var out = [UInt8](repeating: 0, count: dtype.byteCount(elements: codes.count))
        for (i, c) in codes.enumerated() {
            for b in 0..<bits where c & (1 << UInt32(b)) != 0 {
                let bit = i * bits + b
                out[bit >> 3] |= 1 << UInt8(bit & 7)
            }
        }
        return out
    }

    /// Element bytes stored the way coremltools does for `type` (fp32 → floats;
    /// int32/int16/uint16 → ints; everything else → bytes).
    static func constValue(_ raw: [UInt8], _ type: TensorType) -> ConstValue {
        let n = type.elementCount ?? 0
        let storage: TensorStorage
        switch type.dtype {
        case .fp32:
            storage = .floats((0..<n).map { i in Float(bitPattern: (0..<4).reduce(UInt32(0)) { $0 | UInt32(raw[4 * i + $1]) << (8 * $1) }) })
        case .int32:
            storage = .ints((0..<n).map { i in Int32(bitPattern: (0..<4).reduce(UInt32(0)) { $0 | UInt32(raw[4 * i + $1]) << (8 * $1) }) })
        case .int16:
            storage = .ints((0..<n).map { i in Int32(Int16(bitPattern: UInt16(raw[2 * i]) | UInt16(raw[2 * i + 1]) << 8)) })
        case .uint16:
            storage = .ints((0..<n).map { i in Int32(UInt16(raw[2 * i]) | UInt16(raw[2 * i + 1]) << 8) })
        default:
            storage = .bytes(raw)
        }
        return ConstValue(type: .tensor(type), payload: .tensor(storage))
    }
}
