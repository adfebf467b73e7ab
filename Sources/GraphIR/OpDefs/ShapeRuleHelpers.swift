/// Helpers of the shape rules declared in `OpDefs/`: building types, tracked integer values,
/// the range checks of casts and indices, and the slice arithmetic of `slice_by_index` /
/// `slice_update`.
extension OpDefs {
    static func t(_ dtype: DType, _ shape: [DimExpr]) -> SymType { .tensor(SymTensor(dtype, shape)) }
    /// A shape named by an issue (prints as ``describeShape``).
    static func text(_ s: [DimExpr]) -> IssueShape { IssueShape(shape: s) }
    /// The contents of a small integer operand named by an issue (slice bounds, reshape targets).
    static func value(_ v: [DimExpr]) -> IssueShape { IssueShape(value: v) }

    /// Elementwise integer arithmetic on tracked values (with scalar broadcasting).
    static func combine(_ a: SymValue, _ b: SymValue, op: String, _ f: (DimExpr, DimExpr) -> DimExpr) -> SymValue? {
        switch (a, b) {
        case let (.elements(x), .elements(y)):
            if x.count == y.count { return .elements(zip(x, y).map(f)) }
            if x.count == 1 { return .elements(y.map { f(x[0], $0) }) }
            if y.count == 1 { return .elements(x.map { f($0, y[0]) }) }
            return nil
        case let (.range(s, st, n), .elements(y)) where y.count == 1:
            switch op {
            case "add": return .range(start: s + y[0], step: st, count: n)
            case "sub": return .range(start: s - y[0], step: st, count: n)
            case "mul": return .range(start: s * y[0], step: st * y[0], count: n)
            default: return nil
            }
        case let (.elements(x), .range(s, st, n)) where x.count == 1:
            switch op {
            case "add": return .range(start: x[0] + s, step: st, count: n)
            case "mul": return .range(start: x[0] * s, step: x[0] * st, count: n)
            default: return nil
            }
        default:
            return nil
        }
    }

    /// Integer ranges of the narrow dtypes.
    static func limits(_ dt: DType) -> ClosedRange<Int>? {
        switch dt {
        case .int8: return -128...127
        case .uint8: return 0...255
        case .int16: return -32768...32767
        case .uint16: return 0...65535
        case .int32: return Int(Int32.min)...Int(Int32.max)
        default: return nil
        }
    }

    /// A cast of tracked values (lengths, shapes) into a dtype that cannot hold them.
    static func checkFits(_ v: SymValue, _ dt: DType, _ ctx: inout OpContext) throws {
        guard let lim = limits(dt) else { return }
        let elems: [DimExpr]
        switch v {
        case let .elements(e): elems = e
        case let .range(s, st, n): elems = [s, s + st * (n - 1)]
        }
        for e in elems {
            if let c = e.constant, !lim.contains(c) {
                throw ctx.fail(.castOverflow, "value \(c) does not fit \(dt.rawValue) (\(lim.lowerBound)...\(lim.upperBound)); it wraps",
                               [("x", value(v.elements(limit: 64) ?? elems))])
            }
        }
    }

    /// Index values against a dimension: a constant index or a range window that leaves it.
    static func checkIndices(_ ctx: inout OpContext, _ name: String, dim: DimExpr, axis: Int, _ shapes: [(String, IssueShape)]) throws {
        guard let v = ctx.value(name), let d = dim.constant else { return }
        switch v {
        case let .range(start, step, count):
            guard step.constant == 1, let n = count.constant else { return }
            if n > d {
                throw ctx.fail(.indexOutOfRange, "a window of \(n) indices along axis \(axis) cannot fit a dimension of \(d) at any offset", shapes)
            }
            if let s = start.constant, s < 0 || s &+ n > d {
                throw ctx.fail(.indexOutOfRange, "indices [\(s), \(s + n)) leave axis \(axis) of size \(d)", shapes)
            }
        case let .elements(e):
            for x in e {
                if let c = x.constant, c >= d || c < -d {
                    throw ctx.fail(.indexOutOfRange, "index \(c) is out of range for axis \(axis) of size \(d)", shapes)
                }
            }
        }
    }

    struct Slice {
        var shape: [DimExpr]
        var begins: [DimExpr]
        var sizes: [DimExpr]
        var strides: [Int]
    }

    /// The shape `slice_by_index` / `slice_update` select (begin/end/stride/masks).
    static func sliceShape(_ ctx: inout OpContext, _ xs: [DimExpr], write: Bool) throws -> Slice {
        let r = xs.count
        guard let begin = ctx.elements("begin"), let end = ctx.elements("end") else {
            // Unknown bounds: the rank is known, the sizes are not.
            if write { throw ctx.unknown("slice_update bounds computed from values shape inference does not track") }
            let declared = ctx.op.outputs[0].type.tensorType
            guard let d = declared else { throw Unsupported() }
            let shape = d.shape.enumerated().map { i, dim -> DimExpr in
                dim.fixedValue.map { DimExpr($0) } ?? .opaque("\(ctx.op.outputs[0].name).shape[\(i)]")
            }
            return Slice(shape: shape, begins: [], sizes: [], strides: [])
        }
        let sh = [("x", text(xs)), ("begin", value(begin)), ("end", value(end))]
        guard begin.count == r, end.count == r else {
            throw ctx.fail(write ? .sliceUpdateRank : .shapeError, "begin/end have \(begin.count)/\(end.count) entries for rank \(r)", sh)
        }
        let stride = ctx.constInts("stride") ?? Array(repeating: 1, count: r)
        let bm = ctx.bools("begin_mask") ?? Array(repeating: false, count: r)
        let em = ctx.bools("end_mask") ?? Array(repeating: false, count: r)
        let sm = ctx.bools("squeeze_mask") ?? Array(repeating: false, count: r)
        guard stride.count == r, bm.count == r, em.count == r, sm.count == r else {
            throw ctx.fail(.shapeError, "stride/masks do not have \(r) entries", sh)
        }
        var shape: [DimExpr] = []
        var begins: [DimExpr] = []
        var sizes: [DimExpr] = []
        for i in 0..<r {
            let d = xs[i]
            let s = stride[i]
            guard s != 0 else { throw ctx.fail(.shapeError, "stride 0 on axis \(i)", sh) }
            func norm(_ e: DimExpr) -> DimExpr { if let c = e.constant, c < 0 { return d + DimExpr(c) } else { return e } }
            if sm[i] {
                let b = bm[i] ? DimExpr(0) : norm(begin[i])
                if let bc = b.constant, let dc = d.constant, bc < 0 || bc >= dc {
                    throw ctx.fail(.indexOutOfRange, "axis \(i): index \(begin[i]) is out of range for size \(dc)", sh)
                }
                begins.append(b); sizes.append(1)
                continue
            }
            var size: DimExpr
            var b: DimExpr
            if s > 0 {
                b = bm[i] ? 0 : norm(begin[i])
                var e = em[i] ? d : norm(end[i])
                if write, let ec = e.constant, let dc = d.constant, ec > dc || (b.constant ?? 0) < 0 {
                    throw ctx.fail(.indexOutOfRange, "axis \(i): the write [\(b), \(ec)) leaves a dimension of size \(dc)", sh)
                }
                if let ec = e.constant, let dc = d.constant { e = DimExpr(Swift.min(Swift.max(ec, 0), dc)) }
                if let bc = b.constant, let dc = d.constant { b = DimExpr(Swift.min(Swift.max(bc, 0), dc)) }
                let diff = e - b
                if let dc = diff.constant { size = DimExpr(Swift.max(0, (dc &+ s &- 1) / s)) } else { size = s == 1 ? diff : DimExpr.ceilDiv(diff, DimExpr(s)) }
            } else {
                guard let dc = d.constant else {
                    begins.append(.opaque("begin")); sizes.append(.opaque("size"))
                    shape.append(.opaque("\(ctx.op.outputs[0].name).shape[\(i)]")); continue
                }
                let bb = bm[i] ? dc - 1 : (begin[i].constant.map { $0 < 0 ? $0 + dc : $0 } ?? dc - 1)
                let ee = em[i] ? -1 : (end[i].constant.map { $0 < 0 ? $0 + dc : $0 } ?? -1)
                b = DimExpr(bb)
                size = DimExpr(Swift.max(0, (bb &- ee &- s &- 1) / (0 &- s)))
            }
            if size.constant == 0 {
                throw ctx.fail(.zeroDimension, "axis \(i) of the slice is empty (size 0)", sh)
            }
            begins.append(b); sizes.append(size)
            shape.append(size)
        }
        return Slice(shape: shape, begins: begins, sizes: sizes, strides: stride)
    }
}
