import Foundation
import GraphIR
import Interpreter
import JSON
@testable import Generation
import TestSupport
import XCTest

/// Contract files with values that do not fit the model: one `GenerationError` naming the
/// file and the key, never a trap or an allocation sized by the file.
final class ContractFileHostileTests: XCTestCase {
    func contract(_ json: String, _ model: Model) throws -> GenerationContract {
        try GenerationContract(json: try JSONValue.parse(json), model: model, file: "c.json")
    }

    /// tiny_llama_fp16 holds 64 tokens (KV states [1, H, 64, D], mask [1, 1, S, 64]); a larger
    /// context_length sized the mask tensor of the first call (2 × 10^17 floats: an abort).
    func testAContextLengthBeyondTheCacheIsRefused() throws {
        let model = try ModelLoader.load(path: Fixtures.path("tiny_llama_fp16.mlpackage"))
        for n in ["99999999999999999", "65"] {
            XCTAssertThrowsError(try contract(#"{"context_length": \#(n)}"#, model), n) { e in
                XCTAssertEqual("\(e)", "c.json: \"context_length\" \(n) is more than the 64 tokens the model's KV cache and mask hold (their shapes in function 'main')")
            }
        }
        XCTAssertEqual(try contract(#"{"context_length": 32}"#, model).contextLength, 32)
        XCTAssertEqual(try contract(#"{"context_length": 64}"#, model).contextLength, 64)
        for n in ["0", "-0", "1e999", "2.5", "\"64\""] {
            XCTAssertThrowsError(try contract(#"{"context_length": \#(n)}"#, model), n) { e in
                XCTAssertEqual("\(e)", "c.json: \"context_length\" must be a whole number ≥ 1", n)
            }
        }
    }

    /// A write-offset state the function does not have was taken as given (the run then failed
    /// on another input, naming neither the file nor the state).
    func testAWriteOffsetStateMustBeAStateOfTheFunction() throws {
        let model = try ModelLoader.load(path: Fixtures.path("tiny_llama_fp16.mlpackage"))
        XCTAssertThrowsError(try contract(#"{"write_offset": {"state": "nope"}}"#, model)) { e in
            XCTAssertTrue("\(e)".hasPrefix("c.json: \"write_offset\": function 'main' has no state 'nope' (states: "), "\(e)")
        }
    }

    /// A table of zero columns made a zero block size, then a division by zero per call.
    func testAProviderTableOfZeroColumnsIsRefused() throws {
        let dir = try Fixtures.tempDir(self)
        try Data(repeating: 1, count: 16).write(to: URL(fileURLWithPath: dir + "/t.bin"))
        let scale = try MappedArray(spec: dir + "/t.bin:fp32:4")
        for table in ["int8:4,0", "fp16:4,0"] {
            XCTAssertThrowsError(try TableRowProvider(input: "per_layer_raw", table: try MappedArray(spec: dir + "/t.bin:" + table),
                                                      scale: table.hasPrefix("int8") ? scale : nil, rowsBy: "input_ids"), table) { e in
                XCTAssertTrue("\(e)".contains("columns ≥ 1"), "\(e)")
            }
        }
    }

    /// A contract file is small: one above 16 MiB is refused before it is read (a 100 MB one
    /// took a minute and 750 MB to parse), and a FIFO is not opened.
    func testAHugeFileOrAFIFOIsRefusedBeforeReading() throws {
        let model = try ModelLoader.load(path: Fixtures.path("tiny_llama_fp16.mlpackage"))
        let dir = try Fixtures.tempDir(self)
        let big = dir + "/big.json"
        XCTAssertTrue(FileManager.default.createFile(atPath: big, contents: nil))
        let h = try FileHandle(forWritingTo: URL(fileURLWithPath: big))
        try h.truncate(atOffset: 17 << 20)   // sparse: nothing is written
        try h.close()
        XCTAssertThrowsError(try GenerationContract(contentsOf: big, model: model)) { e in
            XCTAssertEqual("\(e)", "\(big): cannot read the contract file (is \(17 << 20) bytes, more than the \(16 << 20)-byte limit)")
        }
        let fifo = dir + "/fifo.json"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        XCTAssertThrowsError(try GenerationContract(contentsOf: fifo, model: model)) { e in
            XCTAssertEqual("\(e)", "\(fifo): cannot read the contract file (is a FIFO (named pipe), not a regular file)")
        }
    }

    /// `1e999` parses as +inf (as Python's json does): as a masked value it was taken, and shown
    /// as "-inf".
    func testAMaskedValueBeyondFP32IsRefused() throws {
        let model = try ModelLoader.load(path: Fixtures.path("tiny_llama_fp16.mlpackage"))
        for v in ["1e999", "-1e39"] {
            XCTAssertThrowsError(try contract(#"{"mask": {"input": "causal_mask", "masked_value": \#(v)}}"#, model), v) { e in
                XCTAssertEqual("\(e)", "c.json: \"mask.masked_value\" must be a number within fp32's range or \"-inf\"")
            }
        }
        XCTAssertEqual(try contract(#"{"mask": {"input": "causal_mask", "masked_value": -1e4}}"#, model).mask?.maskedValue, -1e4)
    }

    /// The token ids or the mask named a static input: the run then asked to bind the token ids
    /// with --static-input.
    func testAStaticInputCannotBeARoleInput() throws {
        let model = try ModelLoader.load(path: Fixtures.path("tiny_llama_fp16.mlpackage"))
        XCTAssertThrowsError(try contract(#"{"static_inputs": ["input_ids"]}"#, model)) { e in
            XCTAssertEqual("\(e)", "c.json: \"static_inputs\": 'input_ids' is the contract's token_ids input, fed per call (a constant table is another input)")
        }
        XCTAssertThrowsError(try contract(#"{"static_inputs": {"causal_mask": "m.npy"}}"#, model)) { e in
            XCTAssertEqual("\(e)", "c.json: \"static_inputs\": 'causal_mask' is the contract's mask input, fed per call (a constant table is another input)")
        }
        XCTAssertThrowsError(try contract(#"{"provider": {"input": "position_ids", "table": "t.npy"}}"#, model)) { e in
            XCTAssertEqual("\(e)", "c.json: \"provider.input\": 'position_ids' is the contract's positions input, fed per call (a constant table is another input)")
        }
    }
}
