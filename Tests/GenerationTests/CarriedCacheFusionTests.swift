import Foundation
import GraphIR
import Interpreter
import JSON
import Generation
import TestSupport
import XCTest

/// Explicit KV caches carried in place (``Generator`` with an explicit-cache contract,
/// `CarriedCacheFusion`): on the `explicit_kv` recipe (coremltools' iOS 17 conversion:
/// `slice_by_index(key_cache, layer l)` → `scatter` → attention, `stack` of the layers →
/// `key_cache_out`) the slices, scatters and stacks no longer run, and the logits are those of
/// the unfused graph bit for bit and torch's greedy ids; where a condition fails (the cache
/// input read by another op) that cache is not carried and the results are still torch's.
final class CarriedCacheFusionTests: XCTestCase {
    struct Reference {
        var prompt: [Int32]
        var greedy: [Int32]
        var logits: Tensor
    }

    func reference() throws -> Reference {
        let data = try XCTUnwrap(FileManager.default.contents(atPath: Fixtures.path("recipes/explicit_kv.json")))
        let json = try JSONValue.parse(String(decoding: data, as: UTF8.self))
        func ids(_ key: String) throws -> [Int32] { try XCTUnwrap(json[key]?.arrayValue).map { Int32(try XCTUnwrap($0.intValue)) } }
        return Reference(prompt: try ids("prompt_ids"), greedy: try ids("greedy_ids"),
                         logits: try NPY.read(path: Fixtures.path("recipes/explicit_kv_logits.npy")))
    }

    /// Prefill of the prompt, then one call per greedy id (torch's ids fed back): every call's
    /// logits row.
    func rows(_ g: Generator, _ ref: Reference) throws -> [[Float]] {
        g.reset()
        var out = [try g.prefill(ref.prompt)]
        for id in ref.greedy.dropLast() { out.append(try g.prefill([id])) }
        return out
    }

    /// Greedy ids of the rows equal torch's, each row within 0.05 of torch's logits.
    func assertTorch(_ rows: [[Float]], _ ref: Reference, _ label: String) {
        let vocab = ref.logits.shape[1]
        var maxDiff: Float = 0
        var ids: [Int32] = []
        for (k, row) in rows.enumerated() {
            let want = Array(ref.logits.floats[(k * vocab)..<((k + 1) * vocab)])
            maxDiff = max(maxDiff, zip(row, want).map { abs($0 - $1) }.max() ?? .infinity)
            ids.append(Int32(row.indices.max { row[$0] < row[$1] }!))
        }
        XCTAssertEqual(ids, ref.greedy, label)
        XCTAssertLessThan(maxDiff, 0.05, label)
    }

    func testExplicitCachesAreCarriedInPlace() throws {
        let ref = try reference()
        let model = try ModelLoader.load(path: RecipeFixtureTests.path("explicit_kv"))
        let c = try GenerationContract.detect(model: model)
        let g = try Generator(session: Session(model: model, function: c.decodeFunction), contract: c)
        XCTAssertEqual(g.session.plan.carried, ["key_cache": "key_cache_out", "value_cache": "value_cache_out"])
        XCTAssertEqual(Set(g.session.carried.keys), ["key_cache", "value_cache"])
        g.session.plan.profile = [:]
        let fused = try rows(g, ref)
        assertTorch(fused, ref, "carried")

        let sites = g.session.plan.fusionSites
        let pairs = sites.filter { $0.kind == "carried_cache" }
        XCTAssertEqual(pairs.count, 2)
        let writes = sites.filter { $0.kind == "state_write" }
        XCTAssertEqual(writes.count, 4, "one in-place write per layer and cache")
        for s in pairs + writes {
            XCTAssertNil(s.reason, s.op)
            XCTAssertEqual(s.fusedCalls, fused.count, s.op)
            XCTAssertEqual(s.fallbacks, [:], s.op)
        }
        for s in sites where s.kind == "attention" { XCTAssertNil(s.reason, s.op); XCTAssertEqual(s.fallbacks, [:], s.op) }
        let profile = try XCTUnwrap(g.session.plan.profile)
        for op in ["tile", "softmax"] { XCTAssertNil(profile[op], "\(op) still runs") }
        // The layer slices of the caches are gone (left: the position row; the RoPE halves run
        // inside the row-wise regions); every scatter call is a fused write (the profile keys it
        // by its op).
        XCTAssertEqual(profile["slice_by_index"]?.calls, 1 * fused.count, "slice_by_index calls")
        XCTAssertEqual(profile["scatter"]?.calls, writes.reduce(0) { $0 + $1.fusedCalls })
        XCTAssertTrue(g.session.plan.fusionReport().contains("carried_cache"))

        // The unfused graph (caches as input and output tensors): the same logits, bit for bit.
        let plain = try Generator(session: Session(model: model, function: c.decodeFunction), contract: c, carryCaches: false)
        XCTAssertEqual(plain.session.plan.carried, [:])
        XCTAssertEqual(try rows(plain, ref), fused)

        // generate: reset between runs clears the carried caches.
        XCTAssertEqual(try g.generate(prompt: ref.prompt, maxTokens: ref.greedy.count).tokenIDs, ref.greedy)
        XCTAssertEqual(try g.generate(prompt: ref.prompt, maxTokens: ref.greedy.count).tokenIDs, ref.greedy)
    }

    /// `key_cache` is also read by another op (an extra output `identity(key_cache)`): in place
    /// its value would change under that reader, so it is not carried (the reason is reported)
    /// while `value_cache` still is; the ids and logits are still torch's.
    func testCacheReadElsewhereIsNotCarried() throws {
        let ref = try reference()
        let model = try ModelLoader.load(path: RecipeFixtureTests.path("explicit_kv"))
        let c = try GenerationContract.detect(model: model)
        let f = try XCTUnwrap(model.program.function(named: c.decodeFunction))
        let x = try XCTUnwrap(f.inputs.first { $0.name == "key_cache" })
        let seen = Value(name: "key_cache_seen", type: x.type)
        let op = Op(type: "identity", inputs: [OpInput(name: "x", operands: [.value(x)])], outputs: [seen],
                    attributes: [Attribute(name: "name", value: .string("key_cache_seen"))])
        f.body.insert(op, at: 0)
        f.body.outputs.append(seen)

        let g = try Generator(session: Session(model: model, function: c.decodeFunction), contract: c)
        XCTAssertEqual(g.session.plan.carried, ["value_cache": "value_cache_out"])
        let key = try XCTUnwrap(g.session.plan.fusionSites.first { $0.kind == "carried_cache" && $0.op == "key_cache" })
        XCTAssertEqual(key.reason, "'key_cache' is read by ops other than its 2 layer picks")
        XCTAssertEqual(g.session.plan.fusionSites.filter { $0.kind == "state_write" }.count, 2)
        g.session.plan.profile = [:]
        let fused = try rows(g, ref)
        assertTorch(fused, ref, "value_cache carried, key_cache not")
        XCTAssertTrue(g.session.plan.fusionReport().contains("not fused, 1 site: 'key_cache' is read by ops other than its 2 layer picks"),
                      g.session.plan.fusionReport())
        XCTAssertEqual(g.session.plan.profile?["slice_by_index"]?.calls, (1 + 2) * fused.count, "key_cache's layer slices still run")

        let plain = try Generator(session: Session(model: model, function: c.decodeFunction), contract: c, carryCaches: false)
        XCTAssertEqual(try rows(plain, ref), fused)
    }

    /// A pair whose output is not the stacked layers is reported, not fused.
    func testPairThatIsNotAStackedCacheIsReported() throws {
        let model = try ModelLoader.load(path: RecipeFixtureTests.path("explicit_kv"))
        let s = try Session(model: model, carrying: ["key_cache": "logits"])
        XCTAssertEqual(s.plan.carried, [:])
        XCTAssertTrue(s.carried.isEmpty)
        let site = try XCTUnwrap(s.plan.fusionSites.first { $0.kind == "carried_cache" })
        XCTAssertEqual(site.reason, "'logits' is made by linear, not stack / concat of the layers or a chain of updates")
    }

    /// A table bound to an input the contract fills every call (here the carried `key_cache`,
    /// and the token ids) is refused naming the input and its role: the generator's own value
    /// would win and the file be ignored (it was, silently; the CLI's `--static-input
    /// key_cache=FILE` ran as if it were not given).
    func testBindingAPerCallInputIsRefused() throws {
        let model = try ModelLoader.load(path: RecipeFixtureTests.path("explicit_kv"))
        let c = try GenerationContract.detect(model: model)
        let g = try Generator(session: Session(model: model, function: c.decodeFunction), contract: c)
        let dir = NSTemporaryDirectory() + "/carried-bind-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try NPY.write(Tensor(.fp16, shape: [2, 1, 2, 64, 32], floats: [Float](repeating: 1, count: 2 * 2 * 64 * 32)), path: dir + "/kc.npy")
        try NPY.write(Tensor(.int32, shape: [1, 1], ints: [3]), path: dir + "/ids.npy")
        for (name, file, role) in [("key_cache", "kc.npy", "kv"), ("input_ids", "ids.npy", "token_ids")] {
            XCTAssertThrowsError(try g.bind(name, to: MappedArray(spec: dir + "/" + file)), name) { e in
                XCTAssertTrue("\(e)".contains("'\(name)' is the contract's \(role) input"), "\(e)")
            }
        }
        XCTAssertEqual(g.session.plan.boundInputNames, [])
    }
}
