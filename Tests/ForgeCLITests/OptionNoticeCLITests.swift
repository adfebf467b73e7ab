import Foundation
import JSON
import TestSupport
import XCTest

/// Options the CLI cannot follow as given: refused with one line (exit 64) when they cannot
/// mean anything, or followed by a one-line note (stderr) saying what is done instead.
extension CLITests {
    /// `--prompt-length` beyond an LLM's context is a usage error naming the context (64
    /// tokens: CTX of tools/make_recipe_fixtures.py and of the tiny_llama fixtures), for the
    /// explicit-KV recipe and for a stateful package alike.
    func testComparePromptLengthBeyondTheContextIsRefused() throws {
        try assertOneLineError(["compare", try fixture("recipes/explicit_kv.mlpackage"), "--precision", "fp32,fp16", "--prompt-length", "100"],
                               status: 64, contains: "--prompt-length 100 exceeds the context of function 'main' (64 tokens)")
        try assertOneLineError(["compare", try fixture("tiny_llama_fp16.mlpackage"), try fixture("tiny_llama_int8.mlpackage"), "--prompt-length", "65"],
                               status: 64, contains: "(64 tokens)")
    }

    /// The explicit-KV recipe (caches as plain inputs/outputs) is driven as an LLM: a prefill of
    /// `--prompt-length` ids, then `--decode-steps` single-token calls, each side's cache outputs
    /// fed into its next call (logits [1, S, 512]: VOCAB of tools/make_recipe_fixtures.py), no note.
    func testCompareDrivesTheExplicitKVContract() throws {
        let r = try run(["compare", try fixture("recipes/explicit_kv.mlpackage"), "--precision", "fp32,fp16",
                         "--prompt-length", "4", "--decode-steps", "2", "--json"])
        XCTAssertTrue(r.status == 0 || r.status == 1, r.stderr)
        XCTAssertFalse(r.stderr.contains("note: function"), r.stderr)
        let calls = try JSONValue.parse(r.stdout)["calls"]?.arrayValue ?? []
        XCTAssertEqual(calls.compactMap { $0["label"]?.stringValue?.split(separator: " ").prefix(2).joined(separator: " ") },
                       ["prefill of", "decode step", "decode step"])
        for (i, c) in calls.enumerated() {
            let logits = c["outputs"]?.arrayValue?.first(where: { $0["name"]?.stringValue == "logits" })
            XCTAssertEqual(logits?["shape"], .array([.int(1), .int(i == 0 ? 4 : 1), .int(512)]))
        }
    }

    /// A package without a KV cache gets random inputs: given LLM options, one note says they
    /// are not followed; without them there is no note and the output is the same.
    func testCompareNotesLLMOptionsItCannotFollow() throws {
        let m = try fixture("foreign/hf_causal_lm.mlpackage")
        let given = try run(["compare", m, "--precision", "fp32,fp16", "--prompt-length", "8", "--decode-steps", "2"])
        XCTAssertTrue(given.status == 0 || given.status == 1, given.stderr)
        let notes = given.stderr.split(separator: "\n").filter { $0.contains("has no KV cache") }
        XCTAssertEqual(notes.count, 1, given.stderr)
        XCTAssertTrue(notes.first?.contains("--prompt-length is ignored and --decode-steps repeats that call") ?? false, given.stderr)
        let plain = try run(["compare", m, "--precision", "fp32,fp16"])
        XCTAssertFalse(plain.stderr.contains("has no KV cache"), plain.stderr)
        XCTAssertEqual(plain.stdout, try run(["compare", m, "--precision", "fp32,fp16", "--prompt-length", "8"]).stdout)
    }

    /// An empty entry of a comma-separated id list is refused, naming its position.
    func testEmptyListEntriesAreRefused() throws {
        let m = try fixture("tiny_llama_int8.mlpackage")
        try assertOneLineError(["generate", m, "--prompt-ids", "1,,2"], status: 64, contains: "--prompt-ids has an empty entry at position 2 of '1,,2'")
        try assertOneLineError(["generate", m, "--prompt-ids", "1,2,", "--print-prompt"], status: 64, contains: "empty entry at position 3")
        try assertOneLineError(["generate", m, "--prompt-ids", "1", "--stop-ids", ",5"], status: 64, contains: "--stop-ids has an empty entry at position 1")
        try assertOneLineError(["diagnose", m, "--dynamic", "--prompt-ids", "3, ,4"], status: 64, contains: "--prompt-ids has an empty entry at position 2")
    }

    /// `--activations int16` has no int4-weight route: on the int4 recipe a note says the int4
    /// products compute with fp32 activations; int8 weights (or `--activations int8`) get none.
    func testInt16ActivationsOnInt4WeightsAreNoted() throws {
        let int4 = try fixture("recipes/apple_llama31_int4.mlpackage")
        let note = "--activations int16 applies to int8-weight products only"
        let r = try run(["generate", int4, "--prompt-ids", "1,2", "--max-tokens", "1", "--activations", "int16"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stderr.split(separator: "\n").filter { $0.contains(note) }.count, 1, r.stderr)
        let int8 = try run(["generate", int4, "--prompt-ids", "1,2", "--max-tokens", "1", "--activations", "int8"])
        XCTAssertFalse(int8.stderr.contains(note), int8.stderr)
        let int8Weights = try run(["generate", try fixture("tiny_llama_int8.mlpackage"), "--prompt-ids", "1,2", "--max-tokens", "1", "--activations", "int16"])
        XCTAssertEqual(int8Weights.status, 0, int8Weights.stderr)
        XCTAssertFalse(int8Weights.stderr.contains(note), int8Weights.stderr)
        XCTAssertTrue(try run(["generate", "--help"]).stdout.contains("int16 applies to int8 weights only"))
    }
}
