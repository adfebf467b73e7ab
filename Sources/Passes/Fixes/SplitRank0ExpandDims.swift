import GraphIR
import Interpreter

/// The program coremltools' `rank0_expand_dims_swap` pass cannot rewrite: a rank-0
/// `add`/`sub`/`mul`/`real_div`/`floor_div` of one scalar constant whose result feeds exactly
/// one `expand_dims(axes = [0])` and also a tuple input (`stack`, `concat`). The pass rebuilds
/// the other users by input name, misses the tuple, and fails with "Cannot delete op … with
/// active output" — with or without a `slice_update` in sight.
enum Rank0ExpandDims {
    static let binaryOps: Set<String> = ["add", "sub", "mul", "real_div", "floor_div"]

    static func isConst(_ o: Operand?) -> Bool { o?.constValue != nil }

    static func tupleUsers(_ op: Op, uses: UseMap) -> [Op] {
        guard let out = op.outputs.first else { return [] }
        return uses.users(of: out).filter { u in
            u.type != "expand_dims" && u.inputs.contains { i in i.operands.count > 1 && i.operands.contains { $0.value === out } }
        }
    }

    static func expandUsers(_ op: Op, uses: UseMap) -> [Op] {
        guard let out = op.outputs.first else { return [] }
        return uses.users(of: out).filter { $0.type == "expand_dims" }
    }

    static func isTrigger(_ op: Op, uses: UseMap) -> Bool {
        guard binaryOps.contains(op.type), let out = op.outputs.first, out.type.tensorType?.rank == 0,
              let x = op.operand("x"), let y = op.operand("y"),
              x.type.tensorType?.rank == 0, y.type.tensorType?.rank == 0,
              isConst(x) != isConst(y), !uses.isReturned(out) else { return false }
        let e = expandUsers(op, uses: uses)
        guard e.count == 1, e[0].operand("axes")?.constValue?.ints() == [0] else { return false }
        return !tupleUsers(op, uses: uses).isEmpty
    }
}

/// `split_rank0_expand_dims`: gives the `expand_dims` user of a rank-0 binary op its own rank-1
/// copy — the swap coremltools' `rank0_expand_dims_swap` attempts — so that pass no longer
/// matches and coremltools' default pipeline goes through. Same values.
///
/// ```
/// before:
///   int32 end = add(x = off, y = 1)
///   tensor<int32, [1]> end_1d = expand_dims(x = end, axes = [0])
///   tensor<int32, [4]> idx = stack(values = (z, z, end, z), axis = 0)
/// after:
///   int32 end = add(x = off, y = 1)
///   tensor<int32, [1]> off_1d = expand_dims(x = off, axes = [0])
///   tensor<int32, [1]> end_1d = add(x = off_1d, y = [1])
///   tensor<int32, [4]> idx = stack(values = (z, z, end, z), axis = 0)
/// ```
public struct SplitRank0ExpandDims: OpRewritePass {
    public static let info = PassInfo("split_rank0_expand_dims", "Compute the expand_dims user of a rank-0 binary op in rank 1 (coremltools' rank0_expand_dims_swap crash).")
    public init() {}

    public static func isAnchor(_ op: Op) -> Bool { Rank0ExpandDims.binaryOps.contains(op.type) }

    /// Reads the uses afresh (an earlier split changes them), not `site.uses`.
    public func rewrite(_ op: Op, in site: RewriteSite) {
        let function = site.function
        let uses = UseMap(function)
        guard Rank0ExpandDims.isTrigger(op, uses: uses), let out = op.outputs.first, let dt = out.type.tensorType?.dtype,
              let e = Rank0ExpandDims.expandUsers(op, uses: uses).first, let eOut = e.outputs.first else { return }
        var inputs: [(String, Value)] = []
        for name in ["x", "y"] {
            guard let o = op.operand(name) else { continue }
            if let c = o.constValue {
                guard let t = try? ConstConversion.tensor(c), let one = ConstEncoding.constValue(Tensor(dtype: t.dtype, shape: [1], data: t.data), type: TensorType(t.dtype, fixed: [1])) else { continue }
                inputs.append((name, site.make.const("\(op.name)_\(name)_1d", one)))
            } else if let v = o.value, let vt = v.type.tensorType {
                let axes = site.make.ints("\(op.name)_\(name)_axes", [0])
                inputs.append((name, site.make.op("expand_dims", "\(op.name)_\(name)_1d", [("x", v), ("axes", axes)], .tensor(TensorType(vt.dtype, [.fixed(1)])))))
            }
        }
        guard inputs.count == 2 else { site.make.made = []; return }
        let rank1 = site.make.op(op.type, "\(eOut.name)_rank1", inputs, .tensor(TensorType(dt, [.fixed(1)])))
        site.make.flush(before: e)
        function.body.replaceAllUses(of: eOut, with: rank1)
        e.parent?.removeOps { $0 === e }
        site.count("rank-0 expand_dims users split")
    }
}
