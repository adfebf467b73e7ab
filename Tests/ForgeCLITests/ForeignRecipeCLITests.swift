import Foundation
import Interpreter
import JSON
import XCTest

/// Packages made by public conversion recipes we did not write (models-ir/foreign/,
/// tools/make_foreign_fixtures.py), checked against the torch outputs stored beside them.
extension CLITests {
    func foreignTemp() -> String { NSTemporaryDirectory() + "forge-ir-foreign-" + UUID().uuidString }

    /// coremltools' torchvision guide: `ct.ImageType` input + `ClassifierConfig` (`classify` op).
    /// The image goes in as uint8 [H, W, 3] RGB pixels; label and scores match torch.
    func testImageClassifierRunsFromPixels() throws {
        let model = try fixture("foreign/mobilenet_classifier.mlpackage")
        let tmp = foreignTemp()
        defer { try? FileManager.default.removeItem(atPath: tmp) }
        let r = try run(["run", model, "--inputs", "models-ir/foreign/mobilenet_classifier_inputs.npz", "--out", tmp])
        XCTAssertEqual(r.status, 0, r.stderr)
        let ref = try NPZ.read(path: Self.repoRoot + "/models-ir/foreign/mobilenet_classifier_torch.npz")
        let label = try NPY.read(path: tmp + "/classLabel.npy")
        guard case let .string(got) = label.data, case let .string(want) = try XCTUnwrap(ref["classLabel"]).data else {
            return XCTFail("classLabel is not a string array")
        }
        XCTAssertEqual(got, want)
        XCTAssertTrue(r.stdout.contains("classLabel: string [] = \"\(want[0])\""), r.stdout)
        let scores = try NPY.read(path: tmp + "/classLabel_probs.npy").floats
        let torch = try XCTUnwrap(ref["classLabel_probs"]).floats
        XCTAssertEqual(scores.count, 10)
        // fp16 weights (the package) against torch's fp32 weights: about 1e-2 on scores of O(1).
        for (a, b) in zip(scores, torch) { XCTAssertEqual(a, b, accuracy: 0.05) }
        let json = try JSONValue.parse(try run(["run", model, "--inputs", "models-ir/foreign/mobilenet_classifier_inputs.npz", "--json"]).stdout)
        let outs = try XCTUnwrap(json["outputs"]?.arrayValue)
        XCTAssertEqual(outs.first?["value"]?.stringValue, want[0])
        XCTAssertEqual(outs.last?["classes"]?.arrayValue?.count, 10)
        let dump = try run(["dump", model, "--summary"])
        XCTAssertTrue(dump.stdout.contains("input_1: image RGB 64x64"), dump.stdout)
        let desc = try JSONValue.parse(try run(["dump", model, "--json"]).stdout)
        XCTAssertEqual(desc["inputs"]?.arrayValue?.first?["image"]?["color_space"]?.stringValue, "RGB")
        XCTAssertEqual(desc["inputs"]?.arrayValue?.first?["image"]?["width"]?.intValue, 64)
        XCTAssertEqual(desc["outputs"]?.arrayValue?.last?["dictionary"]?["key_type"]?.stringValue, "string")
        // diagnose's fp16 run takes the pixels as run does.
        let d = try run(["diagnose", model, "--precision", "fp16", "--inputs", "models-ir/foreign/mobilenet_classifier_inputs.npz"])
        XCTAssertEqual(d.status, 0, d.stdout + d.stderr)
        XCTAssertTrue(d.stdout.contains("fp16_overflow main (fp16; inputs from"), d.stdout)
    }

    /// The same pixels reversed to BGR are a different image; the [1, 3, H, W] float tensor
    /// Core ML makes of the pixels gives the same result as the pixels; a wrong shape is named.
    func testImageInputForms() throws {
        let model = try fixture("foreign/mobilenet_classifier.mlpackage")
        let tmp = foreignTemp()
        try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: tmp) }
        let pixels = try XCTUnwrap(try NPZ.read(path: Self.repoRoot + "/models-ir/foreign/mobilenet_classifier_inputs.npz")["input_1"])
        XCTAssertEqual(pixels.shape, [64, 64, 3])
        let v = pixels.floats
        var nchw = [Float](repeating: 0, count: v.count)
        for c in 0..<3 { for i in 0..<(64 * 64) { nchw[c * 4096 + i] = v[i * 3 + c] } }
        try NPY.write(Tensor(.fp32, shape: [1, 3, 64, 64], floats: nchw), path: tmp + "/nchw.npy")
        let a = try run(["run", model, "--inputs", "models-ir/foreign/mobilenet_classifier_inputs.npz", "--json"])
        let b = try run(["run", model, "--input", "input_1=" + tmp + "/nchw.npy", "--json"])
        XCTAssertEqual(b.status, 0, b.stderr)
        let ca = try JSONValue.parse(a.stdout)["outputs"]?.arrayValue?.last?["checksum"]?.doubleValue
        let cb = try JSONValue.parse(b.stdout)["outputs"]?.arrayValue?.last?["checksum"]?.doubleValue
        XCTAssertNotNil(ca)
        XCTAssertEqual(ca, cb)
        try NPY.write(Tensor(.uint8, shape: [32, 64, 3], ints: Array(pixels.ints.prefix(32 * 64 * 3))), path: tmp + "/half.npy")
        let bad = try run(["run", model, "--input", "input_1=" + tmp + "/half.npy"])
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.stderr.contains("image input 'input_1' (RGB 64x64) takes uint8 [H, W, 3] RGB pixels"), bad.stderr)
        XCTAssertTrue(bad.stderr.contains("got uint8 [32, 64, 3]"), bad.stderr)
    }

    /// `compare --reference` a torch .npz holding a string label: compared as strings.
    func testClassifierCompareAgainstTorch() throws {
        let model = try fixture("foreign/mobilenet_classifier.mlpackage")
        let r = try run(["compare", model, "--reference", "models-ir/foreign/mobilenet_classifier_torch.npz",
                         "--atol", "0.05", "--rtol", "0", "--json"])
        XCTAssertEqual(r.status, 0, r.stdout + r.stderr)
        let outs = try XCTUnwrap(JSONValue.parse(r.stdout)["calls"]?.arrayValue?.first?["outputs"]?.arrayValue)
        let label = try XCTUnwrap(outs.first { $0["name"]?.stringValue == "classLabel" })
        XCTAssertEqual(label["strings_equal"]?.boolValue, true)
    }

    /// coremltools' stateful-models guide (toy KV cache, two RangeDims, rank-3 mask) and an
    /// exporters-style causal LM (input_ids + attention_mask → logits): torch's values.
    func testGuideStatefulToyAndExportersCausalLMMatchTorch() throws {
        let kv = try fixture("foreign/stateful_toy_kv.mlpackage")
        let a = try run(["compare", kv, "--reference", "models-ir/foreign/stateful_toy_kv_torch.npz", "--atol", "2e-3", "--rtol", "0"])
        XCTAssertEqual(a.status, 0, a.stdout + a.stderr)
        XCTAssertTrue(a.stdout.contains("call 1:"), a.stdout)
        let lm = try fixture("foreign/hf_causal_lm.mlpackage")
        let b = try run(["compare", lm, "--reference", "models-ir/foreign/hf_causal_lm_torch.npz", "--atol", "1e-5", "--rtol", "0"])
        XCTAssertEqual(b.status, 0, b.stdout + b.stderr)
        // No KV cache: generate drives it by feeding the whole sequence per call; dump names it.
        let g = try run(["generate", lm, "--prompt-ids", "1,2", "--max-tokens", "2"])
        XCTAssertEqual(g.status, 0, g.stderr)
        let d = try run(["dump", lm, "--summary"])
        XCTAssertTrue(d.stdout.contains("no KV cache (the whole sequence per call)"), d.stdout)
        let dd = try run(["diagnose", lm, "--dynamic"])
        XCTAssertTrue(dd.stdout.contains("skipped: no KV cache"), dd.stdout + dd.stderr)
    }

    /// `dump --summary` of an encoder says nothing of generation contracts (it is no LLM that
    /// failed detection); the exporters causal LM's contract is printed.
    func testSummaryOfAnEncoderHasNoContractLine() throws {
        let enc = try run(["dump", try fixture("foreign/hf_bert_encoder.mlpackage"), "--summary"])
        XCTAssertEqual(enc.status, 0, enc.stderr)
        XCTAssertFalse(enc.stdout.contains("generation contract"), enc.stdout)
        let toy = try run(["dump", try fixture("foreign/stateful_toy_kv.mlpackage"), "--summary"])
        XCTAssertTrue(toy.stdout.contains("generation contract: none ("), toy.stdout)
    }

    /// A neural network `.mlmodel` (convert_to="neuralnetwork") is refused in one line.
    func testNeuralNetworkIsRefusedClearly() throws {
        let model = try fixture("foreign/nn_classifier.mlmodel")
        let r = try run(["dump", model])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("model type 'neuralNetwork' is not supported"), r.stderr)
        XCTAssertTrue(r.stderr.contains("convert_to=\"mlprogram\""), r.stderr)
    }
}

extension CLITests {
    /// exporters' BERT export gives `input_ids` and `attention_mask` separate RangeDims: diagnose
    /// binds the mask to the ids' length (a tokenizer's contract) instead of reporting the shape
    /// error a mask of another length would hit; the padded call matches torch.
    func testExportersEncoderDiagnosesCleanAndMatchesTorch() throws {
        let model = try fixture("foreign/hf_bert_encoder.mlpackage")
        let d = try run(["diagnose", model, "--seq", "8"])
        XCTAssertEqual(d.status, 0, d.stdout + d.stderr)
        XCTAssertTrue(d.stdout.contains("shapes inferred at: attention_mask_1=8, input_ids_1=8 ok"), d.stdout)
        XCTAssertTrue(d.stdout.contains("'attention_mask' has one entry per token id"), d.stdout)
        XCTAssertTrue(d.stdout.contains("0 errors"), d.stdout)
        let c = try run(["compare", model, "--reference", "models-ir/foreign/hf_bert_encoder_torch.npz", "--atol", "1e-5", "--rtol", "0"])
        XCTAssertEqual(c.status, 0, c.stdout + c.stderr)
    }
}

extension CLITests {
    /// A reference holding outputs but not the inputs they came from is compared with a run on
    /// generated inputs: compare says so instead of passing or failing silently.
    func testCompareNotesAReferenceWithoutInputs() throws {
        let model = try fixture("foreign/hf_causal_lm.mlpackage")
        let tmp = foreignTemp()
        try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: tmp) }
        let ref = try NPZ.read(path: Self.repoRoot + "/models-ir/foreign/hf_causal_lm_torch.npz")
        try NPY.write(try XCTUnwrap(ref["logits"]), path: tmp + "/logits.npy")
        let r = try run(["compare", model, "--reference", tmp])
        XCTAssertTrue(r.stderr.contains("holds no inputs of function 'main': its values are compared with a run on generated inputs"), r.stderr)
        let ok = try run(["compare", model, "--reference", "models-ir/foreign/hf_causal_lm_torch.npz", "--atol", "1e-5", "--rtol", "0"])
        XCTAssertFalse(ok.stderr.contains("holds no inputs"), ok.stderr)
    }
}
