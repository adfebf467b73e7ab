import Foundation
import GraphIR

/// MIL recurrent ops (iOS15 `recurrent`, fp16 from iOS17, `gru.reset_after`/`input_bias` iOS18).
/// Source of the semantics: the MIL op reference (`coremltools.converters.mil.mil.ops.defs.iOS15.recurrent`)
/// and the numpy / torch references of coremltools' own op tests.
///
/// Shapes: `x` [S, B, I]; `initial_h` (and `initial_c`) [B, D·H] (D = 2 for a bidirectional
/// `lstm`, else 1); `weight_ih` [G·H, I], `weight_hh` [G·H, H], `bias` [G·H] (G = 4 for `lstm`,
/// gate order i, f, o, z; 3 for `gru`, order r, o, z; 1 for `rnn`). Outputs: the hidden states
/// [S, B, D·H] (`output_sequence = true`) or [1, B, D·H] (the last step), the final hidden
/// state [B, D·H], and for `lstm` the final cell state [B, D·H].
///
/// - `direction = "reverse"`: the sequence is read from S−1 down to 0 and the hidden states are
///   returned in that processing order.
/// - `lstm` `bidirectional`: forward and backward halves concatenated on the last axis; the
///   backward hidden state of step t is written at position t (aligned with the input, as torch).
///   Without `output_sequence` the single step is [forward final, backward final].
/// - `lstm` peephole [3H] (i, f, o): i and f add `p · c_{t−1}`, o adds `p · c_t`; `clip` clips the
///   cell state `c_t` to [−clip, clip] before `o` and `h_t` are computed.
/// - `gru`: `r`, `z` = recurrent_activation; `o = activation(W_o x + b_o + W_ho (r ⊙ h))`
///   (reset before the product), or with `reset_after = true`
///   `o = activation(W_o x + b_io + r ⊙ (W_ho h + b_ho))` where `input_bias` is b_i· and `bias` b_h·;
///   `h_t = (1 − z) ⊙ o + z ⊙ h_{t−1}`.
/// - Activations: `sigmoid`, `tanh`, `scaled_tanh` (α = β = 1: tanh), `hard_sigmoid` /
///   `sigmoid_hard` (min(max(0.2x + 0.5, 0), 1)), `relu`, `linear` (identity).
enum RecurrentKernels {
    static let table: [String: Kernel] = [
        "lstm": lstm,
        "gru": gru,
        "rnn": rnn,
    ]

    typealias Activation = (Float) -> Float

    static func activation(_ name: String, op: String) throws -> Activation {
        switch name.lowercased() {
        case "sigmoid": return { 1 / (1 + Foundation.exp(-$0)) }
        case "tanh", "scaled_tanh": return { Foundation.tanh($0) }
        case "hard_sigmoid", "sigmoid_hard": return { Swift.min(Swift.max(0.2 * $0 + 0.5, 0), 1) }
        case "relu": return { Swift.max($0, 0) }
        case "linear": return { $0 }
        default:
            throw KernelError("\(op): activation '\(name)' is not one of sigmoid, tanh, scaled_tanh, hard_sigmoid, relu, linear")
        }
    }

    /// The shapes every recurrent op shares, checked.
    struct Dims {
        let s: Int, b: Int, i: Int, h: Int
    }

    static func dims(_ inv: KernelInvocation, x: Tensor, wih: Tensor, whh: Tensor, gates: Int) throws -> Dims {
        let op = inv.op.type
        guard x.rank == 3 else { throw KernelError("\(op): x must be [S, B, I], has shape \(x.shape)") }
        guard wih.rank == 2, whh.rank == 2 else {
            throw KernelError("\(op): weight_ih and weight_hh must be rank 2, have shapes \(wih.shape), \(whh.shape)")
        }
        let h = whh.shape[1]
        guard whh.shape[0] == gates * h, wih.shape[0] == gates * h, wih.shape[1] == x.shape[2] else {
            throw KernelError("\(op): weight_ih \(wih.shape) / weight_hh \(whh.shape) do not match [\(gates)·H, I=\(x.shape[2])] / [\(gates)·H, H]")
        }
        guard h > 0, x.shape[2] > 0 else {
            throw KernelError("\(op): hidden size \(h) and input size \(x.shape[2]) must be positive")
        }
        return Dims(s: x.shape[0], b: x.shape[1], i: x.shape[2], h: h)
    }

    static func vector(_ inv: KernelInvocation, _ name: String, _ n: Int) throws -> [Float]? {
        guard let t = try inv.optionalTensor(name) else { return nil }
        guard t.count == n else { throw KernelError("\(inv.op.type): \(name) has \(t.count) values (shape \(t.shape)), expected \(n)") }
        return t.floats
    }

    static func state(_ inv: KernelInvocation, _ name: String, b: Int, width: Int) throws -> [Float] {
        let t = try inv.tensor(name)
        guard t.count == b * width else {
            throw KernelError("\(inv.op.type): \(name) has shape \(t.shape), expected [\(b), \(width)]")
        }
        return t.floats
    }

    /// out[r] = Σ_k w[r, k] · v[k] for rows `rows` of a row-major [R, K] matrix (Double accumulation).
    @inline(__always)
    static func matvec(_ w: UnsafePointer<Float>, _ rows: Int, _ k: Int, _ v: UnsafePointer<Float>, _ out: UnsafeMutablePointer<Float>) {
        for r in 0..<rows {
            let row = w + r * k
            var acc = 0.0
            for j in 0..<k { acc += Double(row[j]) * Double(v[j]) }
            out[r] = Float(acc)
        }
    }

    // MARK: - lstm

    static func lstm(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let direction = try inv.string("direction", default: "forward")
        guard ["forward", "reverse", "bidirectional"].contains(direction) else {
            throw KernelError("lstm: direction '\(direction)' is not forward, reverse or bidirectional")
        }
        let bidir = direction == "bidirectional"
        let wih = try inv.tensor("weight_ih"), whh = try inv.tensor("weight_hh")
        let d = try dims(inv, x: x, wih: wih, whh: whh, gates: 4)
        let dirs = bidir ? 2 : 1
        let width = dirs * d.h
        let h0 = try state(inv, "initial_h", b: d.b, width: width)
        let c0 = try state(inv, "initial_c", b: d.b, width: width)
        let outSeq = try inv.bool("output_sequence", default: false)
        let recAct = try activation(try inv.string("recurrent_activation", default: "sigmoid"), op: "lstm")
        let cellAct = try activation(try inv.string("cell_activation", default: "tanh"), op: "lstm")
        let outAct = try activation(try inv.string("activation", default: "tanh"), op: "lstm")
        let clip: Float? = inv.has("clip") ? try inv.float("clip") : nil

        struct Direction { let wih: [Float], whh: [Float], bias: [Float], peep: [Float]?, reverse: Bool }
        var directions = [Direction(wih: wih.floats, whh: whh.floats, bias: try vector(inv, "bias", 4 * d.h) ?? [Float](repeating: 0, count: 4 * d.h),
                                    peep: try vector(inv, "peephole", 3 * d.h), reverse: direction == "reverse")]
        if bidir {
            guard let wb = try inv.optionalTensor("weight_ih_back"), let hb = try inv.optionalTensor("weight_hh_back") else {
                throw KernelError("lstm: a bidirectional lstm needs weight_ih_back and weight_hh_back")
            }
            _ = try dims(inv, x: x, wih: wb, whh: hb, gates: 4)
            guard hb.shape[1] == d.h else { throw KernelError("lstm: weight_hh_back \(hb.shape) does not match hidden size \(d.h)") }
            directions.append(Direction(wih: wb.floats, whh: hb.floats, bias: try vector(inv, "bias_back", 4 * d.h) ?? [Float](repeating: 0, count: 4 * d.h),
                                        peep: try vector(inv, "peephole_back", 3 * d.h), reverse: true))
        }
        let xs = x.floats
        let steps = outSeq ? d.s : 1
        var seq = [Float](repeating: 0, count: steps * d.b * width)
        var hOut = [Float](repeating: 0, count: d.b * width), cOut = hOut
        let H = d.h
        var gx = [Float](repeating: 0, count: 4 * H), gh = gx
        for (di, dir) in directions.enumerated() {
            for bi in 0..<d.b {
                var h = Array(h0[(bi * width + di * H)..<(bi * width + di * H + H)])
                var c = Array(c0[(bi * width + di * H)..<(bi * width + di * H + H)])
                for step in 0..<d.s {
                    let t = dir.reverse ? d.s - 1 - step : step
                    xs.withUnsafeBufferPointer { xp in
                        dir.wih.withUnsafeBufferPointer { w in matvec(w.baseAddress!, 4 * H, d.i, xp.baseAddress! + (t * d.b + bi) * d.i, &gx) }
                    }
                    h.withUnsafeBufferPointer { hp in
                        dir.whh.withUnsafeBufferPointer { w in matvec(w.baseAddress!, 4 * H, H, hp.baseAddress!, &gh) }
                    }
                    for k in 0..<H {
                        let pre = { (g: Int) in gx[g * H + k] + gh[g * H + k] + dir.bias[g * H + k] }
                        let pi = dir.peep?[k] ?? 0, pf = dir.peep?[H + k] ?? 0, po = dir.peep?[2 * H + k] ?? 0
                        let ig = recAct(pre(0) + pi * c[k])
                        let fg = recAct(pre(1) + pf * c[k])
                        let zg = cellAct(pre(3))
                        var cn = fg * c[k] + ig * zg
                        if let cl = clip { cn = Swift.min(Swift.max(cn, -cl), cl) }
                        let og = recAct(pre(2) + po * cn)
                        c[k] = cn
                        h[k] = og * outAct(cn)
                    }
                    if outSeq {
                        // uni-directional: processing order; bidirectional: aligned with the input
                        let pos = bidir ? t : step
                        for k in 0..<H { seq[(pos * d.b + bi) * width + di * H + k] = h[k] }
                    }
                }
                for k in 0..<H {
                    hOut[bi * width + di * H + k] = h[k]
                    cOut[bi * width + di * H + k] = c[k]
                }
            }
        }
        if !outSeq { seq = hOut }
        return [EW.floatResult(inv.outputDType(0), [steps, d.b, width], seq),
                EW.floatResult(inv.outputDType(1), [d.b, width], hOut),
                EW.floatResult(inv.outputDType(2), [d.b, width], cOut)]
    }

    // MARK: - gru, rnn

    /// What `gru` and `rnn` read alike, in this order (so the first bad input is the one named):
    /// x, a forward/reverse direction, the weights and sizes, `initial_h`, `output_sequence`.
    struct OneDirection {
        let xs: [Float], wih: [Float], whh: [Float]
        let d: Dims
        let reverse: Bool, outSeq: Bool
        let h0: [Float]

        init(_ inv: KernelInvocation, gates: Int) throws {
            let op = inv.op.type
            let x = try inv.tensor("x")
            let direction = try inv.string("direction", default: "forward")
            guard ["forward", "reverse"].contains(direction) else { throw KernelError("\(op): direction '\(direction)' is not forward or reverse") }
            let wihT = try inv.tensor("weight_ih"), whhT = try inv.tensor("weight_hh")
            d = try RecurrentKernels.dims(inv, x: x, wih: wihT, whh: whhT, gates: gates)
            h0 = try RecurrentKernels.state(inv, "initial_h", b: d.b, width: d.h)
            outSeq = try inv.bool("output_sequence", default: false)
            xs = x.floats
            wih = wihT.floats
            whh = whhT.floats
            reverse = direction == "reverse"
        }

        /// The recurrence: per batch row, per step (the last first when `reverse`),
        /// `gx = W_ih·x_t` and `gh = W_hh·h` (`gates`·H values each), then `cell(gx, gh, &h)`
        /// computes the new h. Outputs: h per step ([S, B, H]; [1, B, H], the last, without
        /// `output_sequence`) and the final h ([B, H]).
        func run(_ inv: KernelInvocation, gates: Int, cell: (_ gx: [Float], _ gh: [Float], _ h: inout [Float]) -> Void) -> [RuntimeValue] {
            let H = d.h
            var h = h0
            let steps = outSeq ? d.s : 1
            var seq = [Float](repeating: 0, count: steps * d.b * H)
            var gx = [Float](repeating: 0, count: gates * H), gh = gx
            for b in 0..<d.b {
                var hb = Array(h[(b * H)..<(b * H + H)])
                for step in 0..<d.s {
                    let t = reverse ? d.s - 1 - step : step
                    xs.withUnsafeBufferPointer { xp in
                        wih.withUnsafeBufferPointer { w in RecurrentKernels.matvec(w.baseAddress!, gates * H, d.i, xp.baseAddress! + (t * d.b + b) * d.i, &gx) }
                    }
                    hb.withUnsafeBufferPointer { hp in
                        whh.withUnsafeBufferPointer { w in RecurrentKernels.matvec(w.baseAddress!, gates * H, H, hp.baseAddress!, &gh) }
                    }
                    cell(gx, gh, &hb)
                    if outSeq { for k in 0..<H { seq[(step * d.b + b) * H + k] = hb[k] } }
                }
                for k in 0..<H { h[b * H + k] = hb[k] }
            }
            if !outSeq { seq = h }
            return [EW.floatResult(inv.outputDType(0), [steps, d.b, H], seq), EW.floatResult(inv.outputDType(1), [d.b, H], h)]
        }
    }

    static func gru(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let one = try OneDirection(inv, gates: 3)
        let H = one.d.h
        let recAct = try activation(try inv.string("recurrent_activation", default: "sigmoid"), op: "gru")
        let act = try activation(try inv.string("activation", default: "tanh"), op: "gru")
        let resetAfter = try inv.bool("reset_after", default: false)
        let bh = try vector(inv, "bias", 3 * H) ?? [Float](repeating: 0, count: 3 * H)
        let bi = try vector(inv, "input_bias", 3 * H) ?? [Float](repeating: 0, count: 3 * H)
        var r = [Float](repeating: 0, count: H), z = r, rh = r, ho = r
        return one.run(inv, gates: 3) { gx, gh, hb in
            // r and z from W_h·h (rows 0..<H and 2H..<3H); o's hidden product depends on reset_after
            for k in 0..<H {
                r[k] = recAct(gx[k] + bi[k] + gh[k] + bh[k])
                z[k] = recAct(gx[2 * H + k] + bi[2 * H + k] + gh[2 * H + k] + bh[2 * H + k])
            }
            if resetAfter {
                for k in 0..<H { ho[k] = r[k] * (gh[H + k] + bh[H + k]) }
            } else {
                for k in 0..<H { rh[k] = r[k] * hb[k] }
                rh.withUnsafeBufferPointer { rp in
                    one.whh.withUnsafeBufferPointer { w in matvec(w.baseAddress! + H * H, H, H, rp.baseAddress!, &ho) }
                }
                for k in 0..<H { ho[k] += bh[H + k] }
            }
            for k in 0..<H {
                let o = act(gx[H + k] + bi[H + k] + ho[k])
                hb[k] = (1 - z[k]) * o + z[k] * hb[k]
            }
        }
    }

    static func rnn(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let one = try OneDirection(inv, gates: 1)
        let act = try activation(try inv.string("activation", default: "tanh"), op: "rnn")
        let bias = try vector(inv, "bias", one.d.h) ?? [Float](repeating: 0, count: one.d.h)
        return one.run(inv, gates: 1) { gx, gh, hb in
            for k in 0..<hb.count { hb[k] = act(gx[k] + gh[k] + bias[k]) }
        }
    }
}
