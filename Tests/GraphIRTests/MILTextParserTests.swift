import Foundation
import XCTest
@testable import GraphIR
import TestSupport

/// The MIL text parser on hand-written snippets (`models-ir/miltext/`, one per grammar form)
/// and on short Apple-compiled texts quoted in the facts sheet (§9.2, §6.3). Expected element
/// encodings are the IEEE 754 / two's complement bit patterns and the LSB-first packing of the
/// facts sheet (§3.5, §5.5), not our own output.
final class MILTextParserTests: XCTestCase {
    func snippet(_ name: String) throws -> String {
        let path = Fixtures.path("miltext/" + name)
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            XCTFail("missing snippet \(path)")
            throw XCTSkip("missing")
        }
        return text
    }

    func parse(_ name: String) throws -> Program {
        try MILTextParser.parse(try snippet(name), file: name).program
    }

    func const(_ p: Program, _ name: String, function: String = "main") -> ConstValue? {
        var found: ConstValue?
        p.function(named: function)?.body.walk { op in
            if op.outputs.first?.name == name { found = op.constValue }
        }
        return found
    }

    func bytes(_ c: ConstValue?) -> [UInt8]? {
        if case let .tensor(.bytes(b))? = c?.payload { return b }
        return nil
    }

    func halves(_ c: ConstValue?) -> [UInt16]? {
        bytes(c).map { b in stride(from: 0, to: b.count, by: 2).map { UInt16(b[$0]) | UInt16(b[$0 + 1]) << 8 } }
    }

    // MARK: - grammar forms

    func testFloatsAreExactBitPatterns() throws {
        let p = try parse("floats.mil")
        guard case let .tensor(.floats(a))? = const(p, "a")?.payload else { return XCTFail("a is not floats") }
        XCTAssertEqual(a.map(\.bitPattern), [0x3F00_0000, 0xC140_0000, 0x0000_0001, 0x7F7F_FFFF])
        // fp16: smallest subnormal, largest subnormal, smallest normal, largest finite, -0, 1.5
        XCTAssertEqual(halves(const(p, "h")), [0x0001, 0x03FF, 0x0400, 0x7BFF, 0x8000, 0x3E00])
        let hs = try XCTUnwrap(halves(const(p, "hs")))
        XCTAssertEqual(Array(hs[0..<2]), [0x7C00, 0xFC00])
        XCTAssertTrue(hs[2] & 0x7C00 == 0x7C00 && hs[2] & 0x03FF != 0, "nan keeps a NaN pattern")
        guard case let .tensor(.doubles(d))? = const(p, "d")?.payload else { return XCTFail("d is not doubles") }
        XCTAssertEqual(d.map(\.bitPattern), [0x0000_0000_0000_0001, 0x3FB9_9999_9999_999A])
        XCTAssertEqual(halves(const(p, "b")), [0x3F80, 0xFF7F])
        XCTAssertEqual(bytes(const(p, "e")), [0x7E, 0x81]) // e4m3fn: 448 (max), -2^-9 (smallest subnormal)
        guard case let .tensor(.floats(dec))? = const(p, "dec")?.payload else { return XCTFail() }
        XCTAssertEqual(dec, [1.5, -0.0025])
        XCTAssertEqual(const(p, "s")?.type, .scalar(.fp32))
        guard case let .tensor(.floats(s))? = const(p, "s")?.payload else { return XCTFail() }
        XCTAssertEqual(s, [2.5])
        XCTAssertEqual(halves(const(p, "sh")), [0x0001])
    }

    func testIntegersOfEveryWidth() throws {
        let p = try parse("integers.mil")
        XCTAssertEqual(bytes(const(p, "i8")), [0x80, 0x00, 0x7F])
        XCTAssertEqual(bytes(const(p, "u8")), [0x00, 0xFF])
        XCTAssertEqual(const(p, "i16")?.payload, .tensor(.ints([-32768, 32767])))
        XCTAssertEqual(const(p, "u16")?.payload, .tensor(.ints([65535])))
        XCTAssertEqual(const(p, "i32")?.payload, .tensor(.ints([Int32.min, Int32.max])))
        XCTAssertEqual(bytes(const(p, "u32")), [0xFF, 0xFF, 0xFF, 0xFF])
        XCTAssertEqual(const(p, "i64")?.payload, .tensor(.longInts([Int64.min, Int64.max])))
        XCTAssertEqual(const(p, "u64")?.payload, .tensor(.longInts([-1])))
        XCTAssertEqual(bytes(const(p, "i4")), [0x78, 0x0F])
        XCTAssertEqual(bytes(const(p, "u1")), [0x0D, 0x01])
        XCTAssertEqual(bytes(const(p, "u2")), [0x23])
        XCTAssertEqual(bytes(const(p, "u3")), [0x4F, 0x01])
        XCTAssertEqual(bytes(const(p, "u4")), [0x0F, 0x09])
        XCTAssertEqual(bytes(const(p, "u6")), [0x7F, 0x00])
        XCTAssertEqual(const(p, "m")?.payload, .tensor(.ints([1, 2, 3, 4])))
        XCTAssertEqual(const(p, "empty")?.payload, .tensor(.ints([])))
        XCTAssertEqual(const(p, "flags")?.payload, .tensor(.bools([true, false, true])))
        XCTAssertEqual(const(p, "hex")?.payload, .tensor(.ints([127])))
    }

    func testStringsTuplesListsDictsAndVariadicInputs() throws {
        let p = try parse("strings_and_collections.mil")
        guard case let .dict(entries)? = p.attributes.first(where: { $0.name == "buildInfo" })?.value.payload else { return XCTFail("no buildInfo") }
        XCTAssertEqual(entries.map { $0.key.stringValue }, ["coremltools-version", "quote\"and\\slash"])
        XCTAssertEqual(entries[1].value.stringValue, "tab\there\nnewline\u{01}")
        let f = try XCTUnwrap(p.function(named: "main"))
        XCTAssertEqual(f.attributes.first?.value.stringValue, "café ☕")
        let concat = f.body.operations[0]
        XCTAssertEqual(concat.input("values")?.operands.compactMap(\.value?.name), ["a", "b"])
        XCTAssertEqual(concat.input("axis")?.operands.first?.constant?.payload, .tensor(.ints([1])))
        let add = f.body.operations[1]
        XCTAssertEqual(add.operand("y")?.constant?.payload, .tensor(.floats([1, 2, 3, 4])))
        XCTAssertEqual(add.attribute("pair")?.type, .tuple([.scalar(.int32), .scalar(.string)]))
        guard case let .tuple(pair)? = add.attribute("pair")?.payload else { return XCTFail() }
        XCTAssertEqual(pair.map(\.payload), [.tensor(.ints([3])), .tensor(.strings(["x"]))])
        guard case let .list(sizes)? = add.attribute("sizes")?.payload else { return XCTFail() }
        XCTAssertEqual(sizes.map(\.payload), [.tensor(.ints([1, 2])), .tensor(.ints([3, 4]))])
        guard case let .dict(table)? = add.attribute("table")?.payload else { return XCTFail() }
        XCTAssertEqual(table.map(\.value.payload), [.tensor(.ints([1])), .tensor(.ints([2, 3]))])
        XCTAssertEqual(const(p, "words")?.payload, .tensor(.strings(["", "\"quoted\""])))
    }

    func testNestedBlocks() throws {
        let p = try parse("blocks.mil")
        let f = try XCTUnwrap(p.function(named: "main"))
        let cond = f.body.operations[0]
        XCTAssertEqual(cond.type, "cond")
        XCTAssertEqual(cond.blocks.count, 2)
        XCTAssertEqual(cond.blocks.map { $0.outputs.map(\.name) }, [["t"], ["e"]])
        XCTAssertTrue(cond.blocks[0].operations[0].operandValues[0] === f.inputs[0], "a nested block sees the function's values")
        let loop = f.body.operations[2]
        XCTAssertEqual(loop.outputs.map(\.name), ["n", "acc"])
        XCTAssertEqual(loop.blocks.map { $0.inputs.map(\.name) }, [["i", "v"], ["i", "v"]])
        XCTAssertEqual(loop.blocks[1].outputs.map(\.name), ["next", "w"])
        XCTAssertEqual(f.outputs.map(\.name), ["acc", "n"])
        XCTAssertNoThrow(try Verifier.verify(Model(specificationVersion: 9, description: ModelDescription(), program: p), path: "blocks.mil"))
    }

    func testMultiOutputOpsStatesAndDims() throws {
        let p = try parse("multi_output_states.mil")
        let f = try XCTUnwrap(p.function(named: "main"))
        XCTAssertEqual(f.inputs[1].type, .state(.tensor(.fp16, [1, 4])))
        XCTAssertEqual(f.inputs[0].type, .tensor(TensorType(.fp16, [.fixed(1), .unknown])))
        XCTAssertEqual(f.body.operations[0].outputs.map(\.name), ["lo", "hi"])
        XCTAssertEqual(f.body.operations[1].outputs.map(\.name), ["a", "b"])
        let write = f.body.operations[4]
        XCTAssertEqual(write.type, "write_state")
        XCTAssertTrue(write.outputs.isEmpty)
        XCTAssertEqual(p.function(named: "other")?.inputs[0].type, .tensor(TensorType(.fp32, [.fixed(1), .variadic])))
        XCTAssertEqual(p.functions.map(\.opset), ["CoreML8", "CoreML8"])
    }

    // MARK: - Apple-compiled text

    /// Apple's text, parsed and printed again, reads the same apart from the documented
    /// differences: the header is always `program(1.3)` (both versions are proto version 1)
    /// and the old scalar spelling `tensor<string, []>("x")` prints as `string("x")`.
    func testAppleTextPrintsBackUnchanged() throws {
        for name in ["apple_quantized_program13.mil", "apple_flexible_range.mil", "apple_flexible_enumerated_multifunction.mil", "apple_old_spelling_program10.mil"] {
            let text = try snippet(name)
            let parsed = try MILTextParser.parse(text, file: name)
            let printed = MILPrinter.print(Model(specificationVersion: 9, description: ModelDescription(), program: parsed.program), elideAbove: Int.max)
            var expected = text
            if name == "apple_old_spelling_program10.mil" {
                XCTAssertEqual(parsed.headerVersion, "1.0")
                expected = expected.replacingOccurrences(of: "program(1.0)", with: "program(1.3)")
                    .replacingOccurrences(of: "tensor<string, []>", with: "string")
                    .replacingOccurrences(of: "tensor<uint64, []>", with: "uint64")
            }
            XCTAssertEqual(printed, expected, name)
        }
    }

    func testFlexibleShapeInformationReadsRangesAndEnumeratedShapes() throws {
        let range = try parse("apple_flexible_range.mil")
        let info = try FlexibleShapeInformation(try XCTUnwrap(range.functions[0].attributes.first?.value))
        XCTAssertEqual(info.input("input")?.defaultShape, [1, 4])
        XCTAssertEqual(info.input("input")?.flexibility, .range([SizeRange(lower: 1, upper: 4), SizeRange(lower: 4, upper: 4)]))
        let multi = try parse("apple_flexible_enumerated_multifunction.mil")
        let first = try FlexibleShapeInformation(try XCTUnwrap(multi.functions[0].attributes.first?.value))
        XCTAssertEqual(first.input("input")?.defaultShape, [4])
        XCTAssertEqual(first.input("input")?.flexibility, .enumerated([[4], [1], [2]]))
        let second = try FlexibleShapeInformation(try XCTUnwrap(multi.functions[1].attributes.first?.value))
        XCTAssertEqual(second.input("input")?.flexibility, .range([SizeRange(lower: 1, upper: nil)]))
    }

    func testEverySnippetPrintsAndParsesBackToTheSameIR() throws {
        let dir = Fixtures.path("miltext")
        let names = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".mil") }.sorted()
        XCTAssertGreaterThanOrEqual(names.count, 9)
        for name in names {
            let a = Model(specificationVersion: 9, description: ModelDescription(), program: try parse(name))
            let text = MILPrinter.print(a, elideAbove: Int.max)
            let b = Model(specificationVersion: 9, description: ModelDescription(), program: try MILTextParser.parse(text, file: "printed " + name).program)
            XCTAssertEqual(IREquivalence.differences(a, b), [], name)
        }
    }

    // MARK: - errors

    func parseError(_ text: String) -> MILTextError? {
        do {
            _ = try MILTextParser.parse(text, file: "t.mil")
            return nil
        } catch let e as MILTextError {
            return e
        } catch {
            XCTFail("not a MILTextError: \(error)")
            return nil
        }
    }

    func testErrorsNameLineColumnAndShowACaret() throws {
        let text = """
        program(1.3)
        {
            func main<ios18>(tensor<fp32, [4]> x) {
                    tensor<fp32, [4]> y = add(x = x y = x)[name = string("y")];
                } -> (y);
        }
        """
        let e = try XCTUnwrap(parseError(text))
        XCTAssertEqual(e.line, 4)
        XCTAssertEqual(e.column, 45)
        XCTAssertEqual(e.headline, "t.mil:4:45: expected ',' between the arguments of add, found 'y'")
        XCTAssertEqual(e.caretLines, """
                    tensor<fp32, [4]> y = add(x = x y = x)[name = string("y")];
                                                    ^
        """)
    }

    func testMeaningErrors() throws {
        func body(_ ops: String, inputs: String = "tensor<fp32, [2]> x") -> String {
            "program(1.3)\n{\n    func main<ios18>(\(inputs)) {\n            \(ops)\n        } -> (x);\n}\n"
        }
        let cases: [(String, String)] = [
            (body("tensor<fp32, [2]> y = relu(x = z);"), "argument 'x' of relu refers to undefined value 'z'"),
            (body("tensor<fp32, [2]> x = relu(x = x);"), "output 'x' is already defined"),
            (body("tensor<fp32, [2]> y = const()[val = tensor<fp32, [2]>([1])];"), "tensor<fp32, [2]> literal has 1 element, its shape needs 2"),
            (body("tensor<int8, [1]> y = const()[val = tensor<int8, [1]>([128])];"), "128 is out of range for int8 [-128, 127]"),
            (body("tensor<int32, [1]> y = const()[val = tensor<int32, [1]>([1.5])];"), "'1.5' is not an integer (int32 takes no fraction or exponent)"),
            (body("tensor<fp32, [2]> y = const()[val = tensor<fp32, [2]>(<2 values>)];"), "elided tensor payload"),
            (body("tensor<fp32, [2]> y = relu(x = s);", inputs: "tensor<fp32, [2]> x, state<tensor<fp32, [2]>> s"), "takes state 's'"),
            (body("string y = const()[val = string(\"a\\q\")];"), "unknown escape '\\q'"),
            (body("string y = const()[val = string(\"abc"), "unterminated string"),
        ]
        for (text, message) in cases {
            let e = try XCTUnwrap(parseError(text), message)
            XCTAssertTrue(e.message.contains(message), "\(e.headline) does not say: \(message)")
            XCTAssertEqual(e.line, 4, e.headline)
        }
        // A missing ';' is found at the next token, on the next line.
        let semicolon = try XCTUnwrap(parseError(body("tensor<fp32, [2]> y = relu(x = x)")))
        XCTAssertEqual(semicolon.headline, "t.mil:5:9: expected ';' at the end of the relu statement, found '}'")
        let deep = "program(1.3)\n[a = " + String(repeating: "tuple<", count: 200) + "int32" + String(repeating: ">", count: 200) + "(0)]\n{\n}\n"
        XCTAssertTrue(try XCTUnwrap(parseError(deep)).message.contains("nested deeper than 64"))
        XCTAssertEqual(parseError("program(1.3) {\n func f<ios18>() { } -> (); func f<ios18>() { } -> (); }")?.message, "function 'f' is defined twice")
    }

    func testLiteralAndTypeEntryPoints() throws {
        XCTAssertEqual(try MILTextParser.parseLiteral("fp32(0x1p-1)"), .fp32(0.5))
        XCTAssertEqual(try MILTextParser.parseLiteral("tensor<string, []>(\"x\")"), .string("x"))
        XCTAssertEqual(try MILTextParser.parseType("state<tensor<fp16, [1, ?]>>"), .state(.tensor(TensorType(.fp16, [.fixed(1), .unknown]))))
    }
}
