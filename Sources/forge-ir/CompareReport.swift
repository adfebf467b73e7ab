import Comparison
import Foundation
import GraphIR
import JSON

/// Text table and JSON of `forge-ir compare` (schema in the README).
enum CompareReport {
    static func num(_ x: Double) -> JSONValue { x.isFinite ? .double(x) : x.isNaN ? .null : .string(x > 0 ? "inf" : "-inf") }

    static func json(_ m: ErrorMetrics) -> JSONValue {
        .object([
            "max_abs": num(m.maxAbs), "max_rel": num(m.maxRel), "cosine": num(m.cosine),
            "snr_db": num(m.snrDB), "psnr_db": num(m.psnrDB),
            "top1_agreement": m.top1Agreement.map { .double($0) } ?? .null,
            "count": .int(m.count), "violations": .int(m.violations),
            "nan": .array([.int(m.referenceNaN), .int(m.candidateNaN)]),
            "inf": .array([.int(m.referenceInf), .int(m.candidateInf)]),
        ])
    }

    static func json(_ s: TensorStats) -> JSONValue {
        .object(["dtype": .string(s.dtype), "shape": .array(s.shape.map { .int($0) }), "min": num(s.min), "max": num(s.max),
                 "mean": num(s.mean), "max_abs": num(s.maxAbs), "nan": .int(s.nan), "inf": .int(s.inf)])
    }

    static func json(_ v: ValueComparison) -> JSONValue {
        .object([
            "name": .string(v.name), "op": v.op.map { .string($0) } ?? .null, "op_type": v.opType.map { .string($0) } ?? .null,
            "index": .int(v.index), "dtype": .string(v.dtype), "shape": .array(v.shape.map { .int($0) }),
            "reference_shape": v.referenceShape.map { .array($0.map { .int($0) }) } ?? .null,
            "metrics": v.metrics.map(json) ?? .null, "strings_equal": v.stringsEqual.map { .bool($0) } ?? .null, "ok": .bool(v.ok),
        ])
    }

    static func json(_ d: Divergence) -> JSONValue {
        .object([
            "call": .int(d.call), "value": json(d.value),
            "isolated": d.isolated.map { .object(["metrics": json($0), "ok": .bool(d.isolatedOK ?? false)]) } ?? .null,
            "isolation_note": d.isolationNote.map { .string($0) } ?? .null,
            "after": d.after.map { .object(["name": .string($0.name), "index": .int($0.index)]) } ?? .null,
            "inputs": .array(d.inputs.map { i in
                .object(["input": .string(i.input), "value": .string(i.value),
                         "reference": i.reference.map(json) ?? .null, "candidate": i.candidate.map(json) ?? .null,
                         "metrics": i.metrics.map(json) ?? .null])
            }),
        ])
    }

    static func json(_ results: [CallComparison], reference: String, candidate: String, tolerance: Tolerance, ok: Bool) -> JSONValue {
        let first = results.lazy.compactMap(\.firstDivergence).first
        return .object([
            "schema": .int(1), "reference": .string(reference), "candidate": .string(candidate),
            "tolerance": .object(["atol": .double(tolerance.atol), "rtol": .double(tolerance.rtol), "min_snr_db": tolerance.minSNR.map { .double($0) } ?? .null]),
            "calls": .array(results.map { c in
                .object(["call": .int(c.call), "label": .string(c.label),
                         "outputs": .array(c.outputs.map(json)), "ops": .array(c.ops.map(json)),
                         "first_divergence": c.firstDivergence.map(json) ?? .null,
                         "first_local_divergence": c.firstLocalDivergence.map(json) ?? .null,
                         "unrecorded": .int(c.unrecorded), "candidate_only": .int(c.candidateOnly)])
            }),
            "first_divergence": first.map(json) ?? .null,
            "first_local_divergence": results.lazy.compactMap(\.firstLocalDivergence).first.map(json) ?? .null,
            "ok": .bool(ok),
        ])
    }

    static func fmt(_ x: Double) -> String {
        if x.isNaN { return "nan" }
        if x.isInfinite { return x > 0 ? "inf" : "-inf" }
        if x == 0 { return "0" }
        if Swift.abs(x) >= 1e4 || Swift.abs(x) < 1e-3 { return String(format: "%.3g", x) }
        return String(format: "%.4g", x)
    }

    static func pad(_ s: String, _ w: Int, left: Bool = false) -> String {
        let fill = String(repeating: " ", count: max(0, w - s.count))
        return left ? s + fill : fill + s
    }

    static func row(_ v: ValueComparison, width: Int) -> String {
        var out = pad(v.name, width, left: true) + " " + pad(v.opType ?? "-", 22, left: true) + " " + pad("\(v.shape)", 16, left: true)
        if let eq = v.stringsEqual { return out + (eq ? " same strings" + pad("ok", 66) : " strings differ" + pad("FAIL", 66)) + "\n" }
        guard let m = v.metrics else { return out + " shape differs: reference \(v.referenceShape ?? [])\n" }
        out += pad(fmt(m.maxAbs), 10) + pad(fmt(m.maxRel), 10) + pad(String(format: "%.6f", m.cosine), 10)
            + pad(fmt(m.snrDB), 9) + pad(fmt(m.psnrDB), 9) + pad(m.top1Agreement.map { String(format: "%.3f", $0) } ?? "-", 7)
            + pad("\(m.referenceNaN + m.referenceInf)/\(m.candidateNaN + m.candidateInf)", 9) + "  " + (v.ok ? "ok" : "FAIL") + "\n"
        return out
    }

    static func header(width: Int) -> String {
        pad("value", width, left: true) + " " + pad("op type", 22, left: true) + " " + pad("shape", 16, left: true)
            + pad("max_abs", 10) + pad("max_rel", 10) + pad("cosine", 10) + pad("SNR dB", 9) + pad("PSNR dB", 9) + pad("top-1", 7)
            + pad("nan+inf", 9) + "\n"
    }

    static func stats(_ s: TensorStats?) -> String {
        guard let s else { return "-" }
        var t = "min \(fmt(s.min)) max \(fmt(s.max)) mean \(fmt(s.mean)) max|x| \(fmt(s.maxAbs))"
        if s.nan > 0 { t += " nan \(s.nan)" }
        if s.inf > 0 { t += " inf \(s.inf)" }
        return t
    }

    static func text(_ results: [CallComparison], reference: String, candidate: String, tolerance: Tolerance, ok: Bool, allOps: Bool) -> String {
        var out = "reference: \(reference)\ncandidate: \(candidate)\n"
        out += "tolerance: |c - r| <= \(fmt(tolerance.atol)) + \(fmt(tolerance.rtol))·|r|\(tolerance.minSNR.map { ", SNR >= \(fmt($0)) dB" } ?? "")\n"
        for c in results {
            let shown = c.outputs + (allOps ? c.ops : [])
            let width = max(12, min(48, shown.map(\.name.count).max() ?? 0))
            out += "\ncall \(c.call): \(c.label)\n" + header(width: width)
            for v in c.outputs { out += row(v, width: width) }
            if allOps {
                out += "ops:\n"
                for v in c.ops { out += row(v, width: width) }
            }
            let failing = c.ops.filter { !$0.ok }.count
            out += "\(c.ops.count) values compared (\(failing) beyond tolerance)"
            if c.candidateOnly > 0 { out += ", \(c.candidateOnly) only in the candidate" }
            if c.unrecorded > 0 { out += ", \(c.unrecorded) not held (over --max-bytes)" }
            out += "\n"
        }
        if let d = results.lazy.compactMap(\.firstDivergence).first {
            let v = d.value
            out += "\nfirst divergence: call \(d.call), \(v.opType ?? "?") '\(v.op ?? v.name)' → '\(v.name)' (value #\(v.index) in op order)\n"
            if let a = d.after, a.index < v.index - 1 {
                out += "  the last compared value before it within tolerance: '\(a.name)' (value #\(a.index)); the break is in the \(v.index - a.index) ops from there\n"
            }
            if let m = v.metrics {
                out += "  max_abs \(fmt(m.maxAbs)), max_rel \(fmt(m.maxRel)), cosine \(String(format: "%.6f", m.cosine)), SNR \(fmt(m.snrDB)) dB, \(m.violations) of \(m.count) elements beyond tolerance\n"
            } else {
                out += "  shape \(v.shape), reference \(v.referenceShape ?? [])\n"
            }
            if let m = d.isolated {
                out += "  alone on the reference's inputs: max_abs \(fmt(m.maxAbs)), SNR \(fmt(m.snrDB)) dB: "
                out += d.isolatedOK == true ? "within tolerance, so the error comes in through its inputs\n" : "still beyond tolerance, so this op computes differently\n"
            } else if let note = d.isolationNote {
                out += "  not run alone: \(note)\n"
            }
            for i in d.inputs {
                out += "  input \(i.input) ('\(i.value)'):\n    reference \(stats(i.reference))\n    candidate \(stats(i.candidate))\n"
                if let m = i.metrics { out += "    error max_abs \(fmt(m.maxAbs)), SNR \(fmt(m.snrDB)) dB\n" }
            }
            if let l = results.lazy.compactMap(\.firstLocalDivergence).first {
                if l.value.name != v.name || l.call != d.call {
                    let m = l.isolated!
                    out += "first op beyond the tolerance on its own: call \(l.call), \(l.value.opType ?? "?") '\(l.value.op ?? l.value.name)' → '\(l.value.name)' (value #\(l.value.index)): alone on the reference's inputs max_abs \(fmt(m.maxAbs)), SNR \(fmt(m.snrDB)) dB\n"
                    for i in l.inputs {
                        out += "  input \(i.input) ('\(i.value)'): reference \(stats(i.reference)); candidate \(stats(i.candidate))\n"
                    }
                }
            } else if d.isolated == nil {
                // The first divergent op itself could not be run alone: nothing is known of it.
                out += "no op that could be run alone is beyond the tolerance on its own; '\(v.op ?? v.name)' could not be (above), so whether it computes differently is not known\n"
            } else {
                out += "no op is beyond the tolerance on its own (run alone on the reference's inputs): the difference accumulates\n"
            }
        } else {
            out += "\nno op diverges beyond the tolerance\n"
        }
        out += ok ? "result: ok\n" : "result: FAIL (a checked value is beyond the tolerance)\n"
        return out
    }
}
