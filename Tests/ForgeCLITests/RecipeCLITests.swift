import Foundation
import GraphIR
import JSON
import XCTest

/// The recipe fixtures (models-ir/recipes/, tools/make_recipe_fixtures.py) through the binary:
/// `dump` prints the detected contract, `generate` gives torch's greedy ids, `bench`,
/// `diagnose` and `diagnose --dynamic` run (no signal: `run` fails the test on one).
extension CLITests {
    static let recipes = ["apple_llama31_fp16", "apple_llama31_int4", "prefill_decode", "sdpa_seed", "explicit_kv"]

    func recipeReference(_ name: String) throws -> (prompt: String, greedy: [Int]) {
        let data = try XCTUnwrap(FileManager.default.contents(atPath: Self.repoRoot + "/models-ir/recipes/" + name + ".json"))
        let j = try JSONValue.parse(String(decoding: data, as: UTF8.self))
        let prompt = try XCTUnwrap(j["prompt_ids"]?.arrayValue).compactMap(\.intValue).map(String.init).joined(separator: ",")
        return (prompt, try XCTUnwrap(j["greedy_ids"]?.arrayValue).compactMap(\.intValue))
    }

    func testRecipesGenerateTorchGreedyIds() throws {
        for name in Self.recipes {
            let model = try fixture("recipes/\(name).mlpackage")
            let ref = try recipeReference(name)
            let r = try run(["generate", model, "--prompt-ids", ref.prompt, "--max-tokens", String(ref.greedy.count), "--json"])
            XCTAssertEqual(r.status, 0, "\(name): \(r.stderr)")
            let ids = try JSONValue.parse(r.stdout)["token_ids"]?.arrayValue?.compactMap(\.intValue)
            XCTAssertEqual(ids, ref.greedy, name)
        }
    }

    func testRecipesDumpBenchDiagnose() throws {
        let recipe = ["apple_llama31_fp16": "Apple Llama 3.1", "apple_llama31_int4": "Apple Llama 3.1",
                      "prefill_decode": "prefill/decode", "sdpa_seed": "per-layer KV states", "explicit_kv": "explicit KV"]
        for name in Self.recipes {
            let model = try fixture("recipes/\(name).mlpackage")
            let dump = try run(["dump", model, "--summary"])
            XCTAssertEqual(dump.status, 0, dump.stderr)
            XCTAssertTrue(dump.stdout.contains("generation contract (detected): \(recipe[name]!)"), "\(name): \(dump.stdout)")
            let json = try JSONValue.parse(try run(["dump", model, "--summary", "--json"]).stdout)
            XCTAssertNotNil(json["generation_contract"]?["token_ids"]?.stringValue, name)

            let bench = try run(["bench", model, "-p", "8", "-n", "4", "-r", "1", "--json"])
            XCTAssertEqual(bench.status, 0, "\(name): \(bench.stderr)")
            XCTAssertGreaterThan(Self.number(try JSONValue.parse(bench.stdout)["decode_tok_s"]) ?? 0, 0, name)

            let diag = try run(["diagnose", model, "--json"])
            XCTAssertTrue([0, 1].contains(diag.status), "\(name): \(diag.stderr)")
            let dyn = try run(["diagnose", model, "--dynamic", "--json"])
            XCTAssertTrue([0, 1].contains(dyn.status), "\(name): \(dyn.stderr)")
            let runs = try JSONValue.parse(dyn.stdout)["runs"]?.arrayValue ?? []
            XCTAssertFalse(runs.isEmpty, name)
            for r in runs {
                let summary = r["summary"]?.stringValue ?? ""
                // The pair's functions each take one width: skipped; every other recipe compares.
                if name == "prefill_decode" { XCTAssertTrue(summary.hasPrefix("skipped:"), summary) } else {
                    XCTAssertTrue(summary.contains("matches"), "\(name): \(summary)")
                }
            }
        }
    }

    func testContractFileOnTheCommandLine() throws {
        let model = try fixture("recipes/sdpa_seed.mlpackage")
        let dir = NSTemporaryDirectory() + "forge-ir-contract-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let good = dir + "/c.json", bad = dir + "/bad.json"
        try #"{"token_ids": "input_ids", "write_offset": {"input": "cache_offset"}, "mask": {"input": "causal_mask", "masked_value": "-inf"}}"#
            .write(toFile: good, atomically: true, encoding: .utf8)
        try #"{"write_offset": {"input": "offset"}}"#.write(toFile: bad, atomically: true, encoding: .utf8)
        let ref = try recipeReference("sdpa_seed")
        let r = try run(["generate", model, "--contract", good, "--prompt-ids", ref.prompt, "--max-tokens", String(ref.greedy.count), "--json"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try JSONValue.parse(r.stdout)["token_ids"]?.arrayValue?.compactMap(\.intValue), ref.greedy)
        let e = try run(["bench", model, "--contract", bad, "-p", "2", "-n", "2", "-r", "1"])
        XCTAssertEqual(e.status, 1)
        XCTAssertTrue(e.stderr.hasPrefix("forge-ir: error: ") && e.stderr.contains("\"write_offset\": function 'main' has no input 'offset'"), e.stderr)
    }

    static func number(_ v: JSONValue?) -> Double? {
        switch v {
        case let .double(d)?: return d
        case let .int(i)?: return Double(i)
        default: return nil
        }
    }
}
