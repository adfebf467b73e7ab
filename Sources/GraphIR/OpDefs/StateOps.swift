/// State access (MIL iOS18 `states`: `read_state`, `coreml_update_state`; `write_state` as the
/// MIL text of compiled models writes it) and `slice_update`, the op KV-cache writes are made of.
/// Kernels: `Interpreter/State/StateKernels.swift`.
extension OpDefs {
    static func declareStateOps(_ b: inout OpTableBuilder) {
        b.family = .state
        b.add(OpSchema("read_state", [req("input", .state)], stateAccess: .read)) { ctx in
            guard let o = ctx.operand("input"), let st = ctx.symType(o).stateTensor else { throw Unsupported() }
            return [.tensor(st)]
        }
        b.add(OpSchema("write_state", [req("input", .state), req("data")], hasSideEffects: true, stateAccess: .write)) { ctx in
            guard let o = ctx.operand("input"), let st = ctx.symType(o).stateTensor, let ss = st.shape else { throw Unsupported() }
            let d = try ctx.tensor("data")
            guard let ds = d.shape else { throw Unsupported() }
            let sh = [("state", text(ss)), ("data", text(ds))]
            guard ds.count == ss.count else { throw ctx.fail(.shapeError, "written data has rank \(ds.count), the state rank \(ss.count)", sh) }
            for (i, (a, b)) in zip(ss, ds).enumerated() { try ctx.requireEqual(a, b, "written data axis \(i) differs from the state", sh) }
            if d.dtype != st.dtype { throw ctx.fail(.shapeError, "written data is \(d.dtype.rawValue), the state \(st.dtype.rawValue)", sh) }
            return []
        }
        b.add(OpSchema("coreml_update_state", [req("state", .state), req("value")], hasSideEffects: true, stateAccess: .write)) { ctx in
            guard let o = ctx.operand("state"), let st = ctx.symType(o).stateTensor else { throw Unsupported() }
            return [.tensor(st)]
        }
        b.add(OpSchema("slice_update", [x(), req("update"), req("begin", .integer), req("end", .integer), opt("stride", .integer),
                                      opt("begin_mask", .bool), opt("end_mask", .bool), opt("squeeze_mask", .bool)])) { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x"), up = try ctx.shape("update")
            for name in ["begin", "end"] {
                if let n = try? ctx.shape(name), n.count == 1, let c = n[0].constant, c != xs.count {
                    throw ctx.fail(.sliceUpdateRank, "\(name) has \(c) entries but x has rank \(xs.count)", [("x", text(xs)), (name, text(n))])
                }
            }
            let sl = try sliceShape(&ctx, xs, write: true)
            let sh = [("x", text(xs)), ("update", text(up)), ("slice", text(sl.shape))]
            guard sl.shape.count == up.count else {
                throw ctx.fail(.shapeError, "update has rank \(up.count), the selected slice \(text(sl.shape))", sh)
            }
            for (i, (a, b)) in zip(sl.shape, up).enumerated() {
                try ctx.requireEqual(a, b, "update axis \(i) must match the selected slice", sh)
            }
            return [.tensor(x)]
        }
    }
}
