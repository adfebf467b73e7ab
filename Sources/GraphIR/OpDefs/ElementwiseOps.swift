/// Elementwise ops (MIL `elementwise_binary`, `elementwise_unary`), `cast` and `identity`:
/// schemas and shape rules. Kernels: `Interpreter/ElementwiseKernels.swift`.
extension OpDefs {
    static func declareElementwise(_ b: inout OpTableBuilder) {
        b.family = .elementwise
        // Elementwise binary (MIL elementwise_binary): x, y with broadcasting; integer values
        // (shapes, lengths) are computed.
        for op in ["add", "sub", "mul", "real_div", "pow", "maximum", "minimum", "floor_div", "mod",
                   "equal", "not_equal", "greater", "greater_equal", "less", "less_equal"] {
            b.add(OpSchema(op, [req("x", .numeric), req("y", .numeric)]), rule: broadcastRule(op))
        }
        for op in ["logical_and", "logical_or", "logical_xor"] {
            b.add(OpSchema(op, [req("x", .bool), req("y", .bool)]), rule: broadcastRule(op))
        }
        // Elementwise unary (MIL elementwise_unary): same type as x.
        for op in ["abs", "acos", "asin", "atan", "atanh", "ceil", "cos", "cosh", "erf", "exp", "exp2",
                   "floor", "round", "sign", "sin", "sinh", "sqrt", "square", "tan", "tanh"] {
            b.add(OpSchema(op, [x(.numeric)]), rule: sameAsX)
        }
        b.add(OpSchema("logical_not", [x(.bool)]), rule: sameAsX)
        for op in ["rsqrt", "inverse", "log"] { b.add(OpSchema(op, [x(.numeric), opt("epsilon", .float)]), rule: sameAsX) }
        b.add(OpSchema("clip", [x(.float), req("alpha", .float), req("beta", .float)]), rule: sameAsX)
        b.add(OpSchema("threshold", [x(.float), req("alpha", .float)]), rule: sameAsX)
        b.add(OpSchema("cast", [x(), req("dtype", .string)])) { ctx in
            let x = try ctx.tensor("x")
            guard let name = ctx.string("dtype"), let dt = DType(rawValue: name == "fp64" ? "fp64" : name) else { throw Unsupported() }
            if dt.isInteger, x.dtype.isInteger || x.dtype == .bool, let v = ctx.value("x") {
                try checkFits(v, dt, &ctx)
                ctx.setValue(v)
            }
            return [.tensor(SymTensor(dt, x.shape))]
        }
        b.add(OpSchema("identity", [x()])) { ctx in
            if let v = ctx.value("x") { ctx.setValue(v) }
            return [.tensor(try ctx.tensor("x"))]
        }

    }

    /// Broadcasting binary ops (numpy rules); comparisons and logical ops give `bool`. Integer
    /// values the graph computes (shapes, offsets) are tracked through the arithmetic ones.
    static func broadcastRule(_ op: String) -> ShapeRule {
        let arith: [String: (DimExpr, DimExpr) -> DimExpr] = [
            "add": (+), "sub": (-), "mul": (*), "floor_div": DimExpr.floorDiv, "mod": DimExpr.mod,
            "maximum": DimExpr.max, "minimum": DimExpr.min,
        ]
        let isCompare = !["add", "sub", "mul", "real_div", "pow", "maximum", "minimum", "floor_div", "mod"].contains(op)
        let f = arith[op]
        return { ctx in
            let x = try ctx.tensor("x"), y = try ctx.tensor("y")
            guard let xs = x.shape, let ys = y.shape else { throw Unsupported() }
            let s = try ctx.broadcast([("x", xs), ("y", ys)])
            if let f, x.dtype.isInteger, let vx = ctx.value("x"), let vy = ctx.value("y") {
                ctx.setValue(combine(vx, vy, op: op, f))
            }
            return [t(isCompare ? .bool : x.dtype, s)]
        }
    }
}
