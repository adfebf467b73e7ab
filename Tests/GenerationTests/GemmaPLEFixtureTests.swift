import Foundation
import GraphIR
import Interpreter
import JSON
import Generation
import TestSupport
import XCTest

/// The Gemma-style per-layer-embedding decoders (tools/make_gemma_ple_fixtures.py,
/// models-ir/gemma/): table mode (the int8 table and fp32 scales bound once as mapped static
/// inputs; iOS 26 int8 input and the iOS 18 int32-widened input) and provider mode (rows of the
/// mapped table dequantized per token into `per_layer_raw`, int8 per-row and int4 per-block
/// scales) reproduce torch's greedy ids over a token-by-token prefill and 16 decode steps.
final class GemmaPLEFixtureTests: XCTestCase {
    struct Reference {
        var prompt: [Int32]
        var greedy: [Int32]
        var logits: Tensor
        var minMargin: Double
    }

    static func path(_ name: String) -> String { Fixtures.path("gemma/" + name) }

    static func number(_ v: JSONValue?) -> Double? {
        switch v {
        case let .double(d)?: return d
        case let .int(i)?: return Double(i)
        default: return nil
        }
    }

    func reference(_ name: String) throws -> Reference {
        let data = try XCTUnwrap(FileManager.default.contents(atPath: Self.path("reference/\(name).json")))
        let json = try JSONValue.parse(String(decoding: data, as: UTF8.self))
        func ids(_ key: String) throws -> [Int32] { try XCTUnwrap(json[key]?.arrayValue).map { Int32(try XCTUnwrap($0.intValue)) } }
        return Reference(prompt: try ids("prompt_ids"), greedy: try ids("greedy_ids"),
                         logits: try NPY.read(path: Self.path("reference/\(name)_logits.npy")),
                         minMargin: try XCTUnwrap(Self.number(json["min_margin"])))
    }

    /// A generator on `package` through the contract file `contract` (or detection), with the
    /// `statics` bound from the fixture folder.
    func generator(_ package: String, contract: String? = nil, statics: [String: String] = [:]) throws -> Generator {
        let model = try ModelLoader.load(path: Self.path(package))
        let c = try contract.map { try GenerationContract(contentsOf: Self.path($0), model: model) } ?? GenerationContract.detect(model: model)
        let g = try Generator(session: Session(model: model, function: c.decodeFunction), contract: c)
        for (n, file) in c.staticInputFiles { try g.bind(n, to: MappedArray(spec: file)) }
        for (n, file) in statics { try g.bind(n, to: MappedArray(spec: Self.path(file))) }
        if let p = c.provider { try g.add(TableRowProvider(p)) }
        XCTAssertTrue(g.unfedStaticInputs.isEmpty)
        return g
    }

    /// Greedy ids over the reference's calls and the last-row logits of every call.
    func greedy(_ g: Generator, _ ref: Reference) throws -> (ids: [Int32], rows: [[Float]]) {
        g.reset()
        var ids: [Int32] = [], rows: [[Float]] = []
        var row = try g.prefill(ref.prompt)
        for k in 0..<ref.greedy.count {
            rows.append(row)
            let next = Int32(row.indices.max { row[$0] < row[$1] }!)
            ids.append(next)
            if k + 1 < ref.greedy.count { row = try g.prefill([next]) }
        }
        return (ids, rows)
    }

    func maxDiff(_ rows: [[Float]], _ ref: Tensor) -> Float {
        let vocab = ref.shape[1]
        var d: Float = 0
        for (k, r) in rows.enumerated() {
            let want = ref.floats[(k * vocab)..<((k + 1) * vocab)]
            d = max(d, zip(r, want).map { abs($0 - $1) }.max() ?? .infinity)
        }
        return d
    }

    func testContractsKnowTheTablesAndTheProvider() throws {
        let table = try ModelLoader.load(path: Self.path("gemma_ple_table.mlpackage"))
        let detected = try GenerationContract.detect(model: table)
        XCTAssertEqual(detected.staticInputs, ["ple_table", "ple_scale"])
        XCTAssertEqual(detected.functions, .single("main", .fixed(1)))
        let file = try GenerationContract(contentsOf: Self.path("gemma_ple_table.json"), model: table)
        XCTAssertEqual(file.staticInputFiles, ["ple_table": Self.path("ple_table.npy"), "ple_scale": Self.path("ple_scale.npy")])

        let provider = try ModelLoader.load(path: Self.path("gemma_ple_provider.mlpackage"))
        XCTAssertEqual(try GenerationContract.detect(model: provider).staticInputs, ["per_layer_raw"])
        let p = try GenerationContract(contentsOf: Self.path("gemma_ple_provider.json"), model: provider)
        XCTAssertEqual(p.staticInputs, [])
        XCTAssertEqual(p.provider, .init(input: "per_layer_raw", table: Self.path("ple_table.npy"), scale: Self.path("ple_scale.npy"), rowsBy: "input_ids"))
        XCTAssertThrowsError(try GenerationContract(json: try JSONValue.parse(#"{"provider": {"input": "per_layer_raw", "table": "t.npy", "rows": "input_ids"}}"#), model: provider)) {
            XCTAssertTrue("\($0)".contains("unknown key \"provider.rows\""), "\($0)")
        }
        XCTAssertThrowsError(try GenerationContract(json: try JSONValue.parse(#"{"provider": {"input": "nope", "table": "t.npy"}}"#), model: provider)) {
            XCTAssertTrue("\($0)".contains("has no input 'nope'"), "\($0)")
        }
    }

    /// Table mode: ids equal torch's, logits within 0.05 (the smallest margin is 0.26).
    func testTableModeMatchesTorch() throws {
        let ref = try reference("gemma_ple_table")
        XCTAssertGreaterThanOrEqual(ref.minMargin, 0.25)
        for package in ["gemma_ple_table.mlpackage", "gemma_ple_table_ios18.mlpackage"] {
            let g = try generator(package, statics: ["ple_table": "ple_table.npy", "ple_scale": "ple_scale.npy"])
            let (ids, rows) = try greedy(g, ref)
            XCTAssertEqual(ids, ref.greedy, package)
            XCTAssertLessThan(maxDiff(rows, ref.logits), 0.05, package)
            // The int8 table stays a view of its file, also for the iOS 18 int32 input.
            guard case let .int8Blob(shape, buffer)? = g.session.plan.boundValue("ple_table") else {
                return XCTFail("\(package): ple_table is not bound as a mapped int8 view")
            }
            XCTAssertEqual(shape, [512, 32])
            XCTAssertTrue(buffer.isMapped, package)
        }
    }

    /// Provider mode, int8 rows with per-row scales and int4 rows with per-block(16) scales.
    func testProviderModeMatchesTorch() throws {
        for name in ["gemma_ple_provider", "gemma_ple_provider_int4"] {
            let ref = try reference(name)
            let g = try generator("gemma_ple_provider.mlpackage", contract: name + ".json")
            let (ids, rows) = try greedy(g, ref)
            XCTAssertEqual(ids, ref.greedy, name)
            XCTAssertLessThan(maxDiff(rows, ref.logits), 0.05, name)
        }
    }

    /// The same function in both forms: table mode dequantizes in the graph (fp32 on the CPU
    /// path), provider mode feeds q·s rounded to fp16 — the logits agree within fp16 rounding.
    func testTableAndProviderModesAgree() throws {
        let ref = try reference("gemma_ple_table")
        let (tIDs, tRows) = try greedy(try generator("gemma_ple_table.mlpackage", contract: "gemma_ple_table.json"), ref)
        let (pIDs, pRows) = try greedy(try generator("gemma_ple_provider.mlpackage", contract: "gemma_ple_provider.json"), ref)
        XCTAssertEqual(tIDs, pIDs)
        var d: Float = 0
        for (a, b) in zip(tRows, pRows) { d = max(d, zip(a, b).map { abs($0 - $1) }.max()!) }
        XCTAssertLessThan(d, 0.05)
    }

    func testProviderRowsAreDequantizedRows() throws {
        let table = try MappedArray(spec: Self.path("ple_table.npy"))
        let scale = try MappedArray(spec: Self.path("ple_scale.npy"))
        let q = try NPY.read(path: Self.path("ple_table.npy")).ints, s = try NPY.read(path: Self.path("ple_scale.npy")).floats
        let model = try ModelLoader.load(path: Self.path("gemma_ple_provider.mlpackage"))
        let f = try XCTUnwrap(model.program.function(named: "main"))
        let p = try TableRowProvider(input: "per_layer_raw", table: table, scale: scale, rowsBy: "input_ids")
        try p.check(against: f)
        let t = try p.value(ids: [7], for: f)
        XCTAssertEqual(t.shape, [1, 1, 32])
        XCTAssertEqual(t.floats, (0..<32).map { Float(q[7 * 32 + $0]) * s[7] })
        XCTAssertThrowsError(try p.value(ids: [512], for: f)) { XCTAssertTrue("\($0)".contains("token id 512 is outside the table's 512 rows"), "\($0)") }
        // int4 nibbles: low nibble first, sign-extended (tools/make_gemma_ple_fixtures.py packs them so).
        let int4 = try MappedArray(spec: Self.path("ple_table_int4.bin") + ":int4:512,32")
        let blocks = try MappedArray(spec: Self.path("ple_scale_blocks.npy"))
        let p4 = try TableRowProvider(input: "per_layer_raw", table: int4, scale: blocks, rowsBy: "input_ids")
        XCTAssertEqual(p4.blockSize, 16)
        let raw = try XCTUnwrap(FileManager.default.contents(atPath: Self.path("ple_table_int4.bin")))
        let byte = raw[raw.startIndex + 7 * 16]
        XCTAssertEqual(int4.int4(at: 7 * 32), Int8(bitPattern: (byte & 0xF) << 4) >> 4)
        XCTAssertEqual(int4.int4(at: 7 * 32 + 1), Int8(bitPattern: byte & 0xF0) >> 4)
        // A scale that fits neither per row nor per block.
        XCTAssertThrowsError(try TableRowProvider(input: "per_layer_raw", table: table, scale: try MappedArray(spec: Self.path("ple_table_int4.bin") + ":fp32:512,3"), rowsBy: "input_ids")) {
            XCTAssertTrue("\($0)".contains("neither per row"), "\($0)")
        }
    }

    func testMappedArraySpecsAndErrors() throws {
        XCTAssertEqual(try MappedArray.parse(spec: "a:b.bin:int8:4,8").path, "a:b.bin")
        XCTAssertEqual(try MappedArray.parse(spec: "a:b.bin:int8:4,8").shape, [4, 8])
        XCTAssertNil(try MappedArray.parse(spec: "t.npy").dtype)
        XCTAssertThrowsError(try MappedArray.parse(spec: "t.bin:int9:4")) { XCTAssertTrue("\($0)".contains("unknown dtype 'int9'"), "\($0)") }
        let dir = try Fixtures.tempDir(self)
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: dir + "/short.bin"))
        XCTAssertThrowsError(try MappedArray(spec: dir + "/short.bin:int8:2,2")) {
            XCTAssertTrue("\($0)".contains("short.bin: holds 3 bytes of data, int8 [2, 2] needs 4"), "\($0)")
        }
        XCTAssertThrowsError(try MappedArray(spec: dir + "/short.bin")) { XCTAssertTrue("\($0)".contains("not a .npy file"), "\($0)") }
        XCTAssertThrowsError(try MappedArray(spec: dir + "/none.npy")) { XCTAssertTrue("\($0)".contains("none.npy: no such file"), "\($0)") }
        // A declared-shape mismatch is a typed error naming the input, its type and the file.
        let model = try ModelLoader.load(path: Self.path("gemma_ple_table.mlpackage"))
        let plan = try ExecutionPlan(function: XCTUnwrap(model.program.function(named: "main")))
        XCTAssertThrowsError(try plan.bind("ple_table", to: MappedArray(spec: Self.path("ple_table_int4.bin") + ":int8:512,16"))) {
            XCTAssertTrue("\($0)".contains("input 'ple_table': dimension 1 is 16, expected 32"), "\($0)")
            XCTAssertTrue("\($0)".contains("ple_table_int4.bin holds int8 [512, 16]"), "\($0)")
        }
        XCTAssertThrowsError(try plan.bind("ple_scale", to: MappedArray(spec: Self.path("ple_table.npy")))) {
            XCTAssertTrue("\($0)".contains("input 'ple_scale': dtype int8, expected fp32"), "\($0)")
        }
    }

    /// An fp16 file stays a view too (``RuntimeValue/halfBlob``), read by ordinary kernels: a
    /// call with the mask bound from a file computes what the call with it passed computes.
    func testFP16StaticInputIsAViewAndComputesLikeAPassedInput() throws {
        let dir = try Fixtures.tempDir(self)
        var m = [Float](repeating: -1e4, count: 32)
        m[0] = 0
        let mask = Tensor(.fp16, shape: [1, 1, 1, 32], floats: m)
        try NPY.write(mask, path: dir + "/mask.npy")
        let model = try ModelLoader.load(path: Self.path("gemma_ple_table.mlpackage"))
        let s1 = try Session(model: model), s2 = try Session(model: model)
        for s in [s1, s2] {
            try s.plan.bind("ple_table", to: MappedArray(spec: Self.path("ple_table.npy")))
            try s.plan.bind("ple_scale", to: MappedArray(spec: Self.path("ple_scale.npy")))
        }
        try s2.plan.bind("causal_mask", to: MappedArray(spec: dir + "/mask.npy"))
        guard case .halfBlob? = s2.plan.boundValue("causal_mask") else { return XCTFail("the fp16 mask is not bound as a view") }
        let rest: [String: Tensor] = ["input_ids": Tensor(.int32, shape: [1, 1], ints: [77]), "position_ids": Tensor(.int32, shape: [1, 1], ints: [0]),
                                      "cache_offset": Tensor(.int32, shape: [1], ints: [0])]
        var passed = rest
        passed["causal_mask"] = mask
        let a = try s1.predict(passed)["logits"]!.floats, b = try s2.predict(rest)["logits"]!.floats
        XCTAssertEqual(a, b)
        XCTAssertEqual(a.count, 512)
    }
}
