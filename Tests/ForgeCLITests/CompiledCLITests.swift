import Foundation
import GraphIR
import JSON
import XCTest

/// Every verb on compiled `.mlmodelc` fixtures (models-ir/compiled/, from
/// tools/make_mlmodelc_fixtures.py), against the `.mlpackage` each was laid out from.
extension CLITests {
    static var compiledNames: [String] {
        let dir = repoRoot + "/models-ir/compiled"
        return ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasSuffix(".mlmodelc") }.sorted()
    }

    static func packageOf(_ compiled: String) -> String {
        let stem = String(compiled.dropLast(".mlmodelc".count))
        return stem.hasPrefix("diag_") ? "models-ir/diag/\(stem.dropFirst(5)).mlpackage" : "models-ir/\(stem).mlpackage"
    }

    /// `dump --json` of each compiled fixture equals its package's (inputs, outputs, states,
    /// flexible shapes, functions with op counts, metadata, blob count), apart from the
    /// `compiled` object that says where the description came from.
    func testCompiledDumpJSONEqualsPackageDump() throws {
        let names = Self.compiledNames
        XCTAssertGreaterThanOrEqual(names.count, 20)
        for name in names {
            let c = try run(["dump", "models-ir/compiled/\(name)", "--json"])
            let p = try run(["dump", Self.packageOf(name), "--json"])
            XCTAssertEqual(c.status, 0, c.stderr)
            XCTAssertEqual(p.status, 0, p.stderr)
            guard case var .object(cj) = try JSONValue.parse(c.stdout) else { return XCTFail(name) }
            XCTAssertEqual(cj["compiled"]?["description_source"]?.stringValue, "coremldata.bin", name)
            cj["compiled"] = nil
            XCTAssertEqual(JSONValue.object(cj), try JSONValue.parse(p.stdout), name)
        }
        let text = try run(["dump", "models-ir/compiled/tiny_llama_int8.mlmodelc", "--summary"])
        XCTAssertTrue(text.stdout.contains("compiled model (model.mil 1.3): description from coremldata.bin, specification version from coremldata.bin\n"), text.stdout)
    }

    /// `run` gives byte-identical outputs from both forms for every recorded input set.
    func testCompiledRunMatchesPackageRun() throws {
        let dir = Self.repoRoot + "/models-ir/inputs"
        let files = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".npz") }.sorted()
        let tmp = NSTemporaryDirectory() + "forge-ir-compiled-run-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: tmp) }
        var compared = 0
        for file in files {
            let parts = String(file.dropLast(4)).split(separator: ".").map(String.init)
            let compiled = "models-ir/compiled/\(parts[0]).mlmodelc"
            guard FileManager.default.fileExists(atPath: Self.repoRoot + "/" + compiled) else { continue }
            var outs: [[String: Data]] = []
            for (k, model) in [compiled, Self.packageOf(parts[0] + ".mlmodelc")].enumerated() {
                let out = "\(tmp)/\(file)-\(k)"
                var args = ["run", model, "--inputs", "models-ir/inputs/\(file)", "--out", out, "--state-out", out + "/states"]
                if parts.count > 1 { args += ["--function", parts[1]] }
                let r = try run(args)
                XCTAssertEqual(r.status, 0, "\(model): \(r.stderr)")
                var arrays: [String: Data] = [:]
                for sub in ["", "/states"] {
                    for f in (try? FileManager.default.contentsOfDirectory(atPath: out + sub)) ?? [] where f.hasSuffix(".npy") {
                        arrays[sub + f] = FileManager.default.contents(atPath: out + sub + "/" + f)
                    }
                }
                outs.append(arrays)
            }
            XCTAssertFalse(outs[0].isEmpty, file)
            XCTAssertEqual(outs[0].keys.sorted(), outs[1].keys.sorted(), file)
            for (k, v) in outs[0] { XCTAssertEqual(v, outs[1][k], "\(file): \(k) differs between .mlmodelc and .mlpackage") }
            compared += 1
        }
        XCTAssertGreaterThanOrEqual(compared, 8)
    }

    /// `diagnose` reads a compiled model like its package (same findings).
    func testCompiledDiagnoseMatchesPackage() throws {
        for name in ["tiny_llama_dynamic_end.mlmodelc", "diag_fp16_rmsnorm_overflow.mlmodelc"] {
            let c = try run(["diagnose", "models-ir/compiled/\(name)", "--json"])
            let p = try run(["diagnose", Self.packageOf(name), "--json"])
            XCTAssertEqual(c.status, p.status, name)
            let codes: (CLITests.Result) throws -> [String] = { r in
                try JSONValue.parse(r.stdout)["findings"]?.arrayValue?.compactMap { $0["code"]?.stringValue } ?? []
            }
            XCTAssertEqual(try codes(c), try codes(p), name)
            XCTAssertFalse(try codes(c).isEmpty, name)
        }
    }

    /// `generate` (greedy) produces the same tokens from both forms.
    func testCompiledGenerateMatchesPackage() throws {
        var tokens: [String] = []
        for model in ["models-ir/compiled/tiny_llama_int8.mlmodelc", "models-ir/tiny_llama_int8.mlpackage"] {
            let r = try run(["generate", model, "--prompt-ids", "1,2,3", "--max-tokens", "6", "--json"])
            XCTAssertEqual(r.status, 0, r.stderr)
            tokens.append("\(try JSONValue.parse(r.stdout)["token_ids"] ?? .null)")
        }
        XCTAssertEqual(tokens[0], tokens[1])
        XCTAssertNotEqual(tokens[0], "null")
    }

    /// Decompile: `optimize X.mlmodelc --pipeline empty -o OUT.mlpackage` writes a package that
    /// loads as the original package did (same IR, same description).
    func testDecompileToPackage() throws {
        let tmp = NSTemporaryDirectory() + "forge-ir-decompile-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: tmp) }
        for name in ["tiny_llama_int8.mlmodelc", "multifunction.mlmodelc", "enumerated_shapes.mlmodelc", "mixed_dtypes.mlmodelc"] {
            let out = "\(tmp)/\(name.dropLast(".mlmodelc".count)).mlpackage"
            let r = try run(["optimize", "models-ir/compiled/\(name)", "--pipeline", "empty", "-o", out])
            XCTAssertEqual(r.status, 0, r.stderr)
            let written = try ModelLoader.load(path: out)
            let original = try ModelLoader.load(path: Self.repoRoot + "/" + Self.packageOf(name))
            XCTAssertEqual(IREquivalence.differences(original, written), [], name)
        }
    }

    /// A model.mil syntax error: one `forge-ir: error:` line naming file:line:column, then the
    /// source excerpt with a caret under the column; exit 1.
    func testCompiledParseErrorShowsLineColumnAndCaret() throws {
        let tmp = NSTemporaryDirectory() + "forge-ir-bad-mil-" + UUID().uuidString + ".mlmodelc"
        try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: tmp) }
        try "program(1.3)\n{\n    func main<ios18>(tensor<fp32, [2]> x) {\n            tensor<fp32, [2]> y = relu(x = x]);\n        } -> (y);\n}\n"
            .write(toFile: tmp + "/model.mil", atomically: true, encoding: .utf8)
        let r = try run(["dump", tmp])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stdout, "")
        XCTAssertEqual(r.stderr, """
        forge-ir: error: \(tmp)/model.mil:4:45: expected ',' between the arguments of relu, found ']'
                    tensor<fp32, [2]> y = relu(x = x]);
                                                    ^

        """)
    }
}
