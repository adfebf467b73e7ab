import Foundation
import GraphIR
import Interpreter
import XCTest

/// Runs the per-op test vectors in `models-ir/opvectors/<family>.json` + `<family>.npz`.
/// The vectors (inputs and expected outputs) are computed by numpy / torch in
/// `tools/opvectors_*.py`; nothing expected comes from forge-ir.
///
/// JSON: `{"cases": [{"id", "op", "inputs": {name: npz_key}, "variadic": {name: [npz_key…]},
/// "strings": {name: value} (string inputs, which an .npz cannot hold),
/// "outputs": [{"key": npz_key, "dtype": "fp32"}], "atol", "rtol", "precision": "fp32"|"fp16",
/// "expect_error": false}]}`.
public enum OpVectors {
    struct Case: Decodable {
        var id: String
        var op: String
        var inputs: [String: String]?
        var variadic: [String: [String]]?
        var strings: [String: String]?
        var outputs: [Output]
        var atol: Double?
        var rtol: Double?
        var precision: String?
        var expect_error: Bool?
        struct Output: Decodable { var key: String; var dtype: String }
    }
    struct File: Decodable { var cases: [Case] }

    public static let dir = Fixtures.repoRoot + "/models-ir/opvectors/"

    /// Builds a one-op program for the case, runs its kernel, compares every output.
    /// - Parameter arrays: the `.npz` holding the arrays (default: `<family>.npz`).
    public static func run(family: String, arrays arraysFile: String? = nil, file: StaticString = #filePath, line: UInt = #line) throws {
        let json = try Data(contentsOf: URL(fileURLWithPath: dir + family + ".json"))
        let cases = try JSONDecoder().decode(File.self, from: json).cases
        let arrays = try NPZ.read(path: dir + (arraysFile ?? family) + ".npz")
        XCTAssertFalse(cases.isEmpty, "no cases for \(family)", file: file, line: line)
        var failures = 0
        for c in cases {
            func array(_ key: String) throws -> Tensor {
                guard let t = arrays[key] else { throw KernelError("case \(c.id): npz has no array '\(key)'") }
                return t
            }
            var values: [String: [RuntimeValue]] = [:]
            var opInputs: [OpInput] = []
            for (name, key) in c.inputs ?? [:] {
                let t = try array(key)
                values[name] = [.tensor(t)]
                opInputs.append(OpInput(name: name, operands: [.value(Value(name: key, type: .tensor(TensorType(t.dtype, fixed: t.shape))))]))
            }
            for (name, text) in c.strings ?? [:] {
                values[name] = [.tensor(Tensor(dtype: .string, shape: [], data: .string([text])))]
                opInputs.append(OpInput(name: name, operands: [.constant(.string(text))]))
            }
            for (name, keys) in c.variadic ?? [:] {
                let ts = try keys.map(array)
                values[name] = ts.map { .tensor($0) }
                opInputs.append(OpInput(name: name, operands: zip(keys, ts).map { .value(Value(name: $0, type: .tensor(TensorType($1.dtype, fixed: $1.shape)))) }))
            }
            let outs = try c.outputs.map { o -> Value in
                guard let dt = DType(rawValue: o.dtype) else { throw KernelError("case \(c.id): unknown dtype \(o.dtype)") }
                return Value(name: o.key, type: .tensor(TensorType(dt, [])))
            }
            let op = Op(type: c.op, inputs: opInputs, outputs: outs, attributes: [Attribute(name: "name", value: .string(c.id))])
            guard let kernel = KernelRegistry.kernel(for: c.op) else {
                XCTFail("\(c.id): no kernel for \(c.op)", file: file, line: line)
                failures += 1
                continue
            }
            let precision = Precision(rawValue: c.precision ?? "fp32") ?? .fp32
            let inv = KernelInvocation(op: op, precision: precision, values: values)
            let results: [RuntimeValue]
            do {
                results = try kernel(inv)
            } catch {
                if c.expect_error == true { continue }
                XCTFail("\(c.id): kernel threw \(error)", file: file, line: line)
                failures += 1
                continue
            }
            if c.expect_error == true {
                XCTFail("\(c.id): expected an error, kernel succeeded", file: file, line: line)
                failures += 1
                continue
            }
            guard results.count == c.outputs.count else {
                XCTFail("\(c.id): \(results.count) outputs, expected \(c.outputs.count)", file: file, line: line)
                failures += 1
                continue
            }
            for (r, o) in zip(results, c.outputs) {
                var got = try r.dense()
                if let dt = DType(rawValue: o.dtype) { got.dtype = dt }
                if precision == .fp16 || got.dtype == .fp16 { Rounding.toStorage(&got) }
                let want = try array(o.key)
                if got.shape != want.shape {
                    XCTFail("\(c.id) \(o.key): shape \(got.shape), expected \(want.shape)", file: file, line: line)
                    failures += 1
                    continue
                }
                let g = got.floats, w = want.floats
                let atol = c.atol ?? 1e-5, rtol = c.rtol ?? 1e-5
                var worst = 0.0, worstIndex = -1
                for i in 0..<w.count {
                    let a = Double(g[i]), b = Double(w[i])
                    if a.isNaN && b.isNaN { continue }
                    if a == b { continue }  // also equal infinities
                    let err = abs(a - b)
                    if !(err <= atol + rtol * abs(b)) && (err > worst || worst.isNaN || err.isNaN) {
                        worst = err.isNaN ? .infinity : err
                        worstIndex = i
                    }
                }
                if worstIndex >= 0 {
                    XCTFail("\(c.id) \(o.key): element \(worstIndex) is \(g[worstIndex]), expected \(w[worstIndex]) (atol \(atol), rtol \(rtol))", file: file, line: line)
                    failures += 1
                }
            }
        }
        print("opvectors \(family): \(cases.count) cases, \(failures) failures")
    }
}
