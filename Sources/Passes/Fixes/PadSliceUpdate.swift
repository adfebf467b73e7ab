import GraphIR
import Interpreter

/// `pad_slice_update`: a `slice_update` whose `begin`/`end` (and `stride`, masks) have fewer
/// entries than the rank of `x` (apple/coreai-models#275: Core ML rejects it; coremltools'
/// frontends emit it for `cache[:, :, pos]`-style writes) gets them padded to the rank: the
/// missing trailing axes are taken whole (begin 0, end = the dimension, `end_mask` true,
/// stride 1, not squeezed). Same write.
///
/// ```
/// before:  y = slice_update(x = k /* [1, 2, 16, 8] */, update = u, begin = [0, 0, p], end = [1, 2, p1])
/// after:   b4 = concat(values = ([0, 0, p], [0]), axis = 0)
///          e4 = concat(values = ([1, 2, p1], [8]), axis = 0)
///          y = slice_update(x = k, update = u, begin = b4, end = e4, end_mask = [false, false, false, true])
/// ```
public struct PadSliceUpdate: OpRewritePass {
    public static let info = PassInfo("pad_slice_update", "Pad slice_update begin/end/stride/masks with fewer entries than the rank (coreai-models#275).")
    public init() {}

    public static func isAnchor(_ op: Op) -> Bool { op.type == "slice_update" }

    public func rewrite(_ op: Op, in site: RewriteSite) {
        guard let xt = op.operand("x")?.type.tensorType, let r = xt.rank as Int?,
              let begin = op.operand("begin")?.value, let end = op.operand("end")?.value,
              let nb = begin.type.tensorType?.shape.first?.fixedValue, let ne = end.type.tensorType?.shape.first?.fixedValue,
              nb == ne, nb < r, nb > 0 else { return }
        let missing = r - nb
        let dims = xt.shape.suffix(missing).map { Int32($0.fixedValue ?? 0) }
        func padded(_ v: Value, _ tail: [Int32], _ base: String) -> Value {
            if let c = Operand.value(v).constValue, let ints = c.ints() {
                return site.make.ints(base, ints.map { Int32($0) } + tail)
            }
            let t = site.make.ints("\(base)_tail", tail)
            let axis = site.make.const("\(base)_axis", .int32(0))
            let inter = site.make.const("\(base)_interleave", .bool(false))
            let n = site.make.names.fresh(base)
            let o = Op(type: "concat", inputs: [OpInput(name: "values", operands: [.value(v), .value(t)]),
                                                OpInput(name: "axis", operands: [.value(axis)]),
                                                OpInput(name: "interleave", operands: [.value(inter)])],
                       outputs: [Value(name: n, type: .tensor(.int32, [r]))], attributes: [Attribute(name: "name", value: .string(n))])
            site.make.made.append(o)
            return o.outputs[0]
        }
        let newBegin = padded(begin, Array(repeating: 0, count: missing), "\(op.name)_begin")
        let newEnd = padded(end, dims, "\(op.name)_end")
        op.setInput("begin", .value(newBegin))
        op.setInput("end", .value(newEnd))
        func padBools(_ name: String, _ fill: Bool) {
            guard let o = op.operand(name) else {
                if name == "end_mask" { op.setInput(name, .value(site.make.bools("\(op.name)_\(name)", Array(repeating: false, count: nb) + Array(repeating: true, count: missing)))) }
                return
            }
            let old = o.constValue?.doubles()?.map { $0 != 0 } ?? Array(repeating: false, count: nb)
            op.setInput(name, .value(site.make.bools("\(op.name)_\(name)", Array(old.prefix(nb)) + Array(repeating: fill, count: missing))))
        }
        padBools("begin_mask", false)
        padBools("end_mask", true)
        padBools("squeeze_mask", false)
        if let s = op.operand("stride"), let old = s.constValue?.ints() {
            op.setInput("stride", .value(site.make.ints("\(op.name)_stride", old.prefix(nb).map { Int32($0) } + Array(repeating: 1, count: missing))))
        }
        site.make.flush(before: op)
        site.count("slice_update bounds padded")
    }
}
