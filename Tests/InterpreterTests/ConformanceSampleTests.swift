import Foundation
import GraphIR
import Interpreter
import TestSupport
import XCTest

/// A committed sample of coremltools' own MIL op tests (`models-ir/conformance/<case>/`:
/// the converted `model.mlpackage`, `inputs.npz`, the test's numpy/torch `expected.npz` and
/// `case.json`), picked by `tools/conformance/sample.py` from a full harvest
/// (`bash tools/conformance/run.sh`). Judged as `tools/conformance/judge.py` does: each case
/// runs at its test backend's precision (fp16 backend: `.fp16`; fp32 backend: `.fp32`, Core ML's
/// CPU path), at the test's atol/rtol, widened to max(100·atol, 0.5) / max(100·rtol, 0.05) for
/// the fp16 backend (coremltools' compare_backend).
final class ConformanceSampleTests: XCTestCase {
    struct Meta: Decodable {
        var id: String
        var test: String
        var precision: String
        var atol: Double
        var rtol: Double
        var also_compare_shapes: Bool?
        var allow_mismatch_ratio: Double?
        var compute_unit: String?
    }

    func testSample() throws {
        let root = Fixtures.path("conformance")
        let ids = try FileManager.default.contentsOfDirectory(atPath: root).filter {
            FileManager.default.fileExists(atPath: root + "/" + $0 + "/case.json")
        }.sorted()
        XCTAssertGreaterThanOrEqual(ids.count, 20, "the sample has \(ids.count) cases")
        var failures: [String] = []
        for id in ids {
            let dir = root + "/" + id
            let meta = try JSONDecoder().decode(Meta.self, from: Data(contentsOf: URL(fileURLWithPath: dir + "/case.json")))
            var atol = meta.atol, rtol = meta.rtol
            if meta.precision == "fp16" || (meta.compute_unit ?? "CPU_ONLY") != "CPU_ONLY" {
                atol = max(atol * 100, 0.5)
                rtol = max(rtol * 100, 0.05)
            }
            do {
                let model = try ModelLoader.load(path: dir + "/model.mlpackage")
                let session = try Session(model: model, precision: meta.precision == "fp16" ? .fp16 : .fp32)
                let outputs = try session.predict(try NPZ.read(path: dir + "/inputs.npz"))
                for (name, want) in try NPZ.read(path: dir + "/expected.npz") {
                    guard let got = outputs[name] else { failures.append("\(id): no output \(name)"); continue }
                    if meta.also_compare_shapes ?? true, got.shape != want.shape, !(want.shape.isEmpty && got.shape == [1]) {
                        failures.append("\(id) \(name): shape \(got.shape), expected \(want.shape)")
                        continue
                    }
                    let g = got.floats, w = want.floats
                    guard g.count == w.count else { failures.append("\(id) \(name): \(g.count) values, expected \(w.count)"); continue }
                    var bad = 0
                    for i in 0..<w.count {
                        let a = Double(g[i]), b = Double(w[i])
                        if a == b || (a.isNaN && b.isNaN) { continue }
                        if !(abs(a - b) <= atol + rtol * abs(b)) { bad += 1 }
                    }
                    if bad > 0 && Double(bad) / Double(max(w.count, 1)) > (meta.allow_mismatch_ratio ?? 0) {
                        failures.append("\(id) \(name): \(bad)/\(w.count) values outside atol \(atol) rtol \(rtol) (\(meta.test))")
                    }
                }
            } catch {
                failures.append("\(id): \(error) (\(meta.test))")
            }
        }
        XCTAssertTrue(failures.isEmpty, failures.joined(separator: "\n"))
        print("conformance sample: \(ids.count) cases, \(failures.count) failures")
    }
}
