import GraphIR

extension RowwiseFusion {
    /// The locals' rows of a plan's regions: one buffer for all of them, so it stays in cache
    /// from region to region (a buffer per region — 151 of up to 30 KB on SmolLM2 — met every
    /// decode step cold after the weight stream, a write miss per line).
    final class Scratch {
        var values: [Float] = []
    }

    /// A fused region at run time: the program, and the original ops for operands it cannot
    /// read as rows.
    final class Runtime {
        let program: Program
        let fallback: FusedFallback
        let site: FusionSite
        /// Every local's row, shared by all the regions of one plan (runs of a plan take turns,
        /// and a region runs on the calling thread alone).
        private let scratch: Scratch

        init(program: Program, fallback: FusedFallback, site: FusionSite, scratch: Scratch) {
            self.program = program
            self.fallback = fallback
            self.site = site
            self.scratch = scratch
        }

        var kernel: Kernel {
            { [self] inv in
                let values = inv.flat
                if let out = try self.rows(values) {
                    site.fusedCalls += 1
                    return [out]
                }
                site.fallbacks["an operand is not rows of the output, a vector, one value a row or a scalar", default: 0] += 1
                return [try fallback.run(values, precision: inv.precision, activations: inv.activations)]
            }
        }

        /// An external operand: its values, its width (values a row), and whether it has a row
        /// per output row (leading dims broadcast) or one row for all (a vector or a scalar).
        struct Source {
            let data: [Float]
            let width: Int
            let perRow: Bool
        }

        /// Runs the program over every row; nil when an operand's shape does not fit (the
        /// fallback then runs the ops).
        func rows(_ values: [RuntimeValue]) throws -> RuntimeValue? {
            let p = program
            // The leading dims of each per-row operand, by external index (an array, not a
            // dictionary: a handful of entries, read in order).
            var leads = [[Int]?](repeating: nil, count: values.count)
            var sources = [Source?](repeating: nil, count: values.count)
            for e in p.dataExternals {
                let t = try values[e].dense()
                let w = p.externalWidths[e]
                guard (t.shape.last ?? 1) == w else { return nil }
                if t.rank == p.rank {
                    leads[e] = Array(t.shape.dropLast())
                    sources[e] = Source(data: t.floats, width: w, perRow: true)
                } else if t.count == w {
                    sources[e] = Source(data: t.floats, width: w, perRow: false)
                } else {
                    return nil
                }
            }
            // The output's leading dims: those of the per-row operands, broadcast (numpy rules,
            // equal ranks).
            guard var lead = leads.first(where: { $0 != nil }) ?? nil else { return nil }
            for case let l? in leads {
                for k in l.indices where l[k] != lead[k] {
                    if lead[k] == 1 { lead[k] = l[k] } else if l[k] != 1 { return nil }
                }
            }
            // concat does not broadcast: its operands' leading dims (each the broadcast of its
            // inputs'; a vector or a scalar has none) must be equal, else the op reports it.
            for operands in p.concatOperandSources {
                var first: [Int]?
                for inputs in operands {
                    var l = [Int](repeating: 1, count: p.rank - 1)
                    for e in inputs {
                        guard let le = leads[e] else { continue }
                        for k in l.indices where le[k] != l[k] {
                            if l[k] == 1 { l[k] = le[k] } else if le[k] != 1 { return nil }
                        }
                    }
                    if let first, first != l { return nil }
                    first = l
                }
            }
            // Checked: broadcast leading dims can multiply past any one operand's size (the
            // original ops then report it).
            var rows = 1
            for n in lead {
                let (v, o) = rows.multipliedReportingOverflow(by: n)
                guard !o, v <= Int(Int32.max) else { return nil }
                rows = v
            }
            // Each per-row operand's row for every output row (0 along its size-1 dims).
            var rowOf = [[Int]?](repeating: nil, count: values.count)
            for (e, l) in leads.enumerated() {
                guard let l, l != lead else { continue }
                var strides = [Int](repeating: 0, count: l.count)
                var acc = 1
                for k in l.indices.reversed() {
                    strides[k] = l[k] == 1 ? 0 : acc
                    acc *= l[k]
                }
                var map = [Int](repeating: 0, count: rows)
                for r in 0..<rows {
                    var rem = r, src = 0
                    for k in lead.indices.reversed() {
                        src += (rem % lead[k]) * strides[k]
                        rem /= lead[k]
                    }
                    map[r] = src
                }
                rowOf[e] = map
            }
            let outWidth = p.instructions.last!.width
            let (total, o) = rows.multipliedReportingOverflow(by: outWidth)
            guard !o, total <= Int(Int32.max) else { return nil }
            var out: [Float] = BufferPool.uninitialized(total)
            let pitch = p.width
            if scratch.values.count < p.widths.count * pitch { scratch.values = [Float](repeating: 0, count: p.widths.count * pitch) }
            let ok = withSources(sources) { ptrs in
                scratch.values.withUnsafeMutableBufferPointer { sp in
                    out.withUnsafeMutableBufferPointer { op in
                        for r in 0..<rows {
                            if !run(row: r, ptrs, sources, rowOf, sp.baseAddress!, op.baseAddress! + r * outWidth) { return false }
                        }
                        return true
                    }
                }
            }
            guard ok else { return nil }
            var shape = lead
            shape.append(outWidth)
            return .tensor(Tensor(p.outputDType, shape: shape, floats: out))
        }

        /// Calls `body` with the base address of every source (nil where none), collected in
        /// one array (no array built per source).
        private func withSources<R>(_ s: [Source?], _ body: ([UnsafePointer<Float>?]) -> R) -> R {
            var ptrs = [UnsafePointer<Float>?](repeating: nil, count: s.count)
            func nest(_ i: Int) -> R {
                if i == s.count { return body(ptrs) }
                guard let src = s[i] else { return nest(i + 1) }
                return src.data.withUnsafeBufferPointer { p in
                    ptrs[i] = p.baseAddress
                    return nest(i + 1)
                }
            }
            return nest(0)
        }

        /// One row: every instruction in order, the last one written to `out`.
        @inline(__always)
        private func run(row r: Int, _ ptrs: [UnsafePointer<Float>?], _ sources: [Source?], _ rowOf: [[Int]?],
                         _ scratch: UnsafeMutablePointer<Float>, _ out: UnsafeMutablePointer<Float>) -> Bool {
            let p = program, pitch = p.width
            /// An operand's values in this row and its width.
            func operand(_ a: Arg) -> (UnsafePointer<Float>, Int)? {
                switch a {
                case let .local(l): return (UnsafePointer(scratch + l * pitch), p.widths[l])
                case let .external(e):
                    guard let base = ptrs[e], let s = sources[e] else { return nil }
                    return (base + (s.perRow ? (rowOf[e]?[r] ?? r) * s.width : 0), s.width)
                }
            }
            let last = p.instructions.count - 1
            for (k, ins) in p.instructions.enumerated() {
                let n = ins.width
                let dst = k == last ? out : scratch + ins.out * pitch
                guard let (a, aw) = operand(ins.a) else { return false }
                // An operand of width 1 under a wider output is one value broadcast.
                let sa = aw == 1 ? 0 : 1
                switch ins.code {
                case let .reduce(mode): dst[0] = Reduce.row(a, aw, mode)
                case let .slice(start): for i in 0..<n { dst[i] = a[start + i] }
                case .concat:
                    var o = 0
                    for i in 0..<aw { dst[i] = a[i] }
                    o = aw
                    for x in ins.rest {
                        guard let (b, bw) = operand(x) else { return false }
                        for i in 0..<bw { dst[o + i] = b[i] }
                        o += bw
                    }
                case .abs: unary(a, sa, dst, n) { Swift.abs($0) }
                case .square: unary(a, sa, dst, n) { $0 * $0 }
                // The kernels' own forms (EW, FastExp; the eight-lane ones lane by lane: the same bits).
                case .sqrt: unary8(a, sa, dst, n) { $0.squareRoot() }
                case .relu: unary(a, sa, dst, n, EW.relu)
                case .sigmoid: unary8(a, sa, dst, n, FastExp.sigmoid8)
                case .silu: unary8(a, sa, dst, n, FastExp.silu8)
                case let .rsqrt(e): unary8(a, sa, dst, n) { EW.rsqrt8($0, e) }
                case let .inverse(e): unary(a, sa, dst, n) { EW.inverse($0, e) }
                case let .clip(lo, hi): unary(a, sa, dst, n) { EW.clip($0, lo, hi) }
                default:
                    guard let bArg = ins.b, let (b, bw) = operand(bArg) else { return false }
                    let sb = bw == 1 ? 0 : 1
                    switch ins.code {
                    case .add: binary(a, sa, b, sb, dst, n) { $0 + $1 }
                    case .sub: binary(a, sa, b, sb, dst, n) { $0 - $1 }
                    case .mul: binary(a, sa, b, sb, dst, n) { $0 * $1 }
                    case .div: binary(a, sa, b, sb, dst, n) { $0 / $1 }
                    case .maximum: binary(a, sa, b, sb, dst, n) { EW.maxNaN($0, $1) }
                    default: binary(a, sa, b, sb, dst, n) { EW.minNaN($0, $1) }
                    }
                }
            }
            return true
        }

        @inline(__always)
        private func unary(_ a: UnsafePointer<Float>, _ sa: Int, _ dst: UnsafeMutablePointer<Float>, _ n: Int, _ f: (Float) -> Float) {
            if sa == 1 { for i in 0..<n { dst[i] = f(a[i]) } } else { let v = f(a[0]); for i in 0..<n { dst[i] = v } }
        }

        @inline(__always)
        private func unary8(_ a: UnsafePointer<Float>, _ sa: Int, _ dst: UnsafeMutablePointer<Float>, _ n: Int,
                            _ f: (SIMD8<Float>) -> SIMD8<Float>) {
            if sa == 1 { FastExp.apply(a, dst, n, f) } else { let v = f(SIMD8(repeating: a[0]))[0]; for i in 0..<n { dst[i] = v } }
        }

        @inline(__always)
        private func binary(_ a: UnsafePointer<Float>, _ sa: Int, _ b: UnsafePointer<Float>, _ sb: Int,
                            _ dst: UnsafeMutablePointer<Float>, _ n: Int, _ f: (Float, Float) -> Float) {
            switch (sa, sb) {
            case (1, 1): for i in 0..<n { dst[i] = f(a[i], b[i]) }
            case (1, _): let y = b[0]; for i in 0..<n { dst[i] = f(a[i], y) }
            case (_, 1): let x = a[0]; for i in 0..<n { dst[i] = f(x, b[i]) }
            default: let v = f(a[0], b[0]); for i in 0..<n { dst[i] = v }
            }
        }
    }
}
