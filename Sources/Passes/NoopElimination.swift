import GraphIR
import Interpreter

/// `noop_elimination`: removes ops that return their input unchanged — `identity`; `add`/`sub`
/// of zero, `mul`/`real_div` by one (when broadcasting does not change the shape or dtype);
/// `reshape` to the same static shape; `transpose` with the identity permutation; `cast` to the
/// same dtype; `tile` with all-one reps; `slice_by_index` / `slice_by_size` selecting the whole
/// static tensor; `concat` / `split` of a single piece.
///
/// ```
/// before:  %z = const(val = 0.0); %y = add(x = %x, y = %z); %o = relu(x = %y)
/// after:   %o = relu(x = %x)
/// ```
public struct NoopElimination: PatternPass {
    public static let info = PassInfo("noop_elimination", "Remove ops that return their input unchanged (identity, +0, *1, same-shape reshape…).")
    public static let statistic = "ops removed"
    public init() {}

    static func constant(_ operand: Operand?) -> Tensor? {
        guard let operand else { return nil }
        switch operand {
        case let .constant(c): return try? ConstConversion.tensor(c)
        case let .value(v):
            guard let p = v.producer, p.type == "const", let c = p.constValue else { return nil }
            return try? ConstConversion.tensor(c)
        }
    }

    static func allEqual(_ t: Tensor?, _ x: Float) -> Bool {
        guard let t, t.count > 0 else { return false }
        return t.floats.allSatisfy { $0 == x }
    }

    /// The input `op` passes through unchanged, or nil.
    static func passthrough(_ op: Op) -> Value? {
        guard op.outputs.count == 1, let out = op.outputs[0].type.tensorType else { return nil }
        func same(_ v: Value?) -> Value? {
            guard let v, let t = v.type.tensorType, t == out || (t.dtype == out.dtype && t.isStatic && t.shape == out.shape) else { return nil }
            return v
        }
        switch op.type {
        case "identity":
            return same(op.operand("x")?.value)
        case "add", "sub":
            let x = op.operand("x")?.value, y = op.operand("y")
            if allEqual(constant(y), 0), let v = same(x) { return v }
            if op.type == "add", allEqual(constant(op.operand("x")), 0), let v = same(y?.value) { return v }
        case "mul", "real_div":
            let x = op.operand("x")?.value, y = op.operand("y")
            if allEqual(constant(y), 1), let v = same(x) { return v }
            if op.type == "mul", allEqual(constant(op.operand("x")), 1), let v = same(y?.value) { return v }
        case "reshape", "cast":
            if let x = op.operand("x")?.value, let t = x.type.tensorType, t.isStatic, t == out { return x }
        case "transpose":
            if let perm = constant(op.operand("perm"))?.ints, perm == (0..<perm.count).map({ Int32($0) }) { return same(op.operand("x")?.value) }
        case "tile":
            if allEqual(constant(op.operand("reps")), 1) { return same(op.operand("x")?.value) }
        case "slice_by_index", "slice_by_size":
            if let x = op.operand("x")?.value, let t = x.type.tensorType, t.isStatic, t == out { return x }
        case "concat":
            if let values = op.input("values"), values.operands.count == 1 { return same(values.operands[0].value) }
        default:
            return nil
        }
        return nil
    }

    public static func pattern(_ op: Op, _ ctx: RewriteContext) throws -> Bool {
        guard let x = passthrough(op) else { return false }
        let out = op.outputs[0]
        // A returned value keeps its name: only remove when the output is not a function output,
        // or the input is not itself a function input/output (names visible outside).
        if ctx.function.body.outputs.contains(where: { $0 === out }) { return false }
        ctx.replaceAllUses(of: out, with: x)
        ctx.erase(op)
        return true
    }
}
