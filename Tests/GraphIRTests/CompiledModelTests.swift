import Foundation
@testable import GraphIR
import JSON
import TestSupport
import XCTest

/// Loading `.mlmodelc` folders (`models-ir/compiled/`, laid out by
/// tools/make_mlmodelc_fixtures.py: model.mil from the printer, coremldata.bin and metadata.json
/// from coremltools' reading of each package's spec). The compiled form must give the same IR
/// and the same `dump --json` description as the package it came from.
final class CompiledModelTests: XCTestCase {
    static let compiledDir = Fixtures.path("compiled")

    static var compiledFixtures: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: compiledDir)) ?? []).filter { $0.hasSuffix(".mlmodelc") }.sorted()
    }

    /// `diag_x.mlmodelc` → `diag/x.mlpackage`, else `x.mlpackage`.
    static func packagePath(_ compiled: String) -> String {
        let stem = String(compiled.dropLast(".mlmodelc".count))
        if stem.hasPrefix("diag_") { return Fixtures.path("diag/" + stem.dropFirst(5) + ".mlpackage") }
        return Fixtures.path(stem + ".mlpackage")
    }

    func json(_ m: Model) -> JSONValue {
        guard case var .object(o) = DescriptionJSON.json(m) else { return .null }
        o["compiled"] = nil
        return .object(o)
    }

    func testEveryPackageHasACompiledFixture() throws {
        let names = Self.compiledFixtures
        let packages = MILRoundTripTests.fixtures.filter { $0.hasSuffix(".mlpackage") }
        XCTAssertEqual(names.count, packages.count, "run tools/make_mlmodelc_fixtures.py")
        XCTAssertGreaterThanOrEqual(names.count, 20)
    }

    func testCompiledFixturesLoadAsTheirPackages() throws {
        for name in Self.compiledFixtures {
            let compiled = try ModelLoader.load(path: Self.compiledDir + "/" + name)
            let package = try ModelLoader.load(path: Self.packagePath(name))
            XCTAssertEqual(compiled.compiled?.descriptionSource, .coremldataBin, name)
            XCTAssertEqual(compiled.compiled?.specificationVersionSource, "coremldata.bin", name)
            let notes = compiled.compiled?.notes ?? []
            XCTAssertEqual(notes.filter { !$0.hasPrefix("coremldata.bin: one 16-byte trailer") }, [], name)
            XCTAssertEqual(json(compiled), json(package), name)
            XCTAssertEqual(IREquivalence.differences(package, compiled), [], name)
        }
    }

    func copyCompiled(_ name: String) throws -> String {
        let dst = try Fixtures.tempDir(self) + "/" + name
        try FileManager.default.copyItem(atPath: Self.compiledDir + "/" + name, toPath: dst)
        return dst
    }

    func interfaces(_ m: Model) -> [JSONValue?] {
        let j = json(m)
        return [j["inputs"], j["outputs"], j["states"], j["functions"], j["default_function"]]
    }

    /// Without coremldata.bin the description comes from metadata.json and is the same.
    func testMetadataJSONFallback() throws {
        for name in ["tiny_llama_fp16.mlmodelc", "multifunction.mlmodelc", "enumerated_shapes.mlmodelc", "mixed_dtypes.mlmodelc"] {
            let dir = try copyCompiled(name)
            try FileManager.default.removeItem(atPath: dir + "/coremldata.bin")
            let m = try ModelLoader.load(path: dir)
            XCTAssertEqual(m.compiled?.descriptionSource, .metadataJSON, name)
            XCTAssertEqual(m.compiled?.specificationVersionSource, "metadata.json", name)
            XCTAssertTrue(m.compiled?.notes.contains("no coremldata.bin") == true, name)
            XCTAssertEqual(json(m), json(try ModelLoader.load(path: Self.packagePath(name))), name)
        }
    }

    /// Without either file the description is rebuilt from the function signatures and their
    /// FlexibleShapeInformation: same inputs, outputs, states and functions; metadata unknown;
    /// enumerated shapes keep the default first but the others in the attribute's key order.
    func testSignatureFallback() throws {
        for name in ["tiny_llama_fp16.mlmodelc", "multifunction.mlmodelc", "mixed_dtypes.mlmodelc", "diag_enumerated_stateful.mlmodelc", "enumerated_shapes.mlmodelc"] {
            let dir = try copyCompiled(name)
            try FileManager.default.removeItem(atPath: dir + "/coremldata.bin")
            try FileManager.default.removeItem(atPath: dir + "/metadata.json")
            let m = try ModelLoader.load(path: dir)
            XCTAssertEqual(m.compiled?.descriptionSource, .functionSignatures, name)
            XCTAssertEqual(m.compiled?.specificationVersionSource, "opset", name)
            let p = try ModelLoader.load(path: Self.packagePath(name))
            XCTAssertEqual(m.specificationVersion, p.specificationVersion, name)
            if name.contains("enumerated") {
                let a = m.description.interface(of: m.defaultFunctionName).inputs, b = p.description.interface(of: p.defaultFunctionName).inputs
                XCTAssertEqual(a.map(\.name), b.map(\.name), name)
                for (x, y) in zip(a, b) {
                    XCTAssertEqual(x.array?.shape, y.array?.shape, name)
                    guard case let .enumerated(s)? = x.array?.flexibility, case let .enumerated(t)? = y.array?.flexibility else { continue }
                    XCTAssertEqual(s.first, t.first, name)
                    XCTAssertEqual(Set(s), Set(t), name)
                }
            } else {
                XCTAssertEqual(interfaces(m), interfaces(p), name)
            }
        }
    }

    func testCoremldataTrailerFormsAndBadHeaders() throws {
        let dir = try copyCompiled("multifunction.mlmodelc")
        let path = dir + "/coremldata.bin"
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        // The writers' two trailers: 16 bytes per function (as written) or a single 16-byte one.
        XCTAssertTrue(try CoreMLDataBin(bytes: bytes).notes[0].contains("per function (2)"))
        XCTAssertEqual(try CoreMLDataBin(bytes: Array(bytes.dropLast(16))).notes, ["coremldata.bin: one 16-byte trailer"])
        XCTAssertTrue(try CoreMLDataBin(bytes: Array(bytes.dropLast(27))).notes[0].contains("unexpected 5-byte trailer"))
        XCTAssertEqual(try CoreMLDataBin(bytes: bytes).description, try ModelLoader.load(path: Fixtures.path("multifunction.mlpackage")).description)
        var badMagic = bytes
        badMagic[0] = 0x01
        XCTAssertThrowsError(try CoreMLDataBin(bytes: badMagic)) { XCTAssertTrue("\($0)".contains("not the magic 502")) }
        var badLength = bytes
        badLength[0x4B + 7] = 0x7F
        XCTAssertThrowsError(try CoreMLDataBin(bytes: badLength)) { XCTAssertTrue("\($0)".contains("runs past the end")) }
        XCTAssertThrowsError(try CoreMLDataBin(bytes: Array(bytes.prefix(40)))) { XCTAssertTrue("\($0)".contains("shorter than")) }
        // An unreadable coremldata.bin falls back to metadata.json, and says why.
        try Data(badMagic).write(to: URL(fileURLWithPath: path))
        let m = try ModelLoader.load(path: dir)
        XCTAssertEqual(m.compiled?.descriptionSource, .metadataJSON)
        XCTAssertTrue(m.compiled?.notes.first?.contains("not the magic 502") == true)
    }

    func testDisagreementsBecomeNotes() throws {
        let dir = try copyCompiled("tiny_llama_fp16.mlmodelc")
        let metaPath = dir + "/metadata.json"
        var text = try String(contentsOfFile: metaPath, encoding: .utf8)
        text = text.replacingOccurrences(of: "\"Ios18.linear\": ", with: "\"Ios18.linear\": 1")
        text = text.replacingOccurrences(of: "\"dataType\": \"Int32\"", with: "\"dataType\": \"Float32\"")
        try text.write(toFile: metaPath, atomically: true, encoding: .utf8)
        let m = try ModelLoader.load(path: dir)
        let notes = m.compiled?.notes ?? []
        XCTAssertTrue(notes.contains { $0.hasPrefix("mlProgramOperationTypeHistogram disagrees") && $0.contains("linear") }, "\(notes)")
        XCTAssertTrue(notes.contains { $0.contains("metadata.json describes input 'input_ids' differently") }, "\(notes)")
        XCTAssertEqual(m.compiled?.descriptionSource, .coremldataBin, "coremldata.bin still wins")
    }

    func testBrokenCompiledModelsGiveTypedErrors() throws {
        // model.mil syntax error: MILTextError naming model.mil, line and column.
        var dir = try copyCompiled("mixed_dtypes.mlmodelc")
        var text = try String(contentsOfFile: dir + "/model.mil", encoding: .utf8)
        text = text.replacingOccurrences(of: "} -> (", with: "} => (")
        try text.write(toFile: dir + "/model.mil", atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try ModelLoader.load(path: dir)) { error in
            guard let e = error as? MILTextError else { return XCTFail("\(error)") }
            XCTAssertEqual(e.file, dir + "/model.mil")
            XCTAssertTrue(e.message.hasPrefix("expected '-> (outputs)' after the body of function 'main', found '='"), e.headline)
            XCTAssertTrue(e.caretLines.hasSuffix("^"), e.caretLines)
        }
        // The weight file the text references is missing.
        dir = try copyCompiled("mixed_dtypes.mlmodelc")
        try FileManager.default.removeItem(atPath: dir + "/weights/weight.bin")
        XCTAssertThrowsError(try ModelLoader.load(path: dir)) { error in
            guard let e = error as? MILTextError else { return XCTFail("\(error)") }
            XCTAssertTrue(e.message.contains("weights/weight.bin: weight file not found"), e.headline)
        }
        // A pipeline: one program per sub-folder, which the IR does not hold.
        let pipe = try Fixtures.tempDir(self) + "/pipe.mlmodelc"
        try FileManager.default.createDirectory(atPath: pipe + "/model0", withIntermediateDirectories: true)
        XCTAssertThrowsError(try ModelLoader.load(path: pipe)) { error in
            XCTAssertTrue("\(error)".contains("a compiled pipeline (model0/, model1/, …)"), "\(error)")
        }
        // A compiled neural network (no model.mil).
        let nn = try Fixtures.tempDir(self) + "/nn.mlmodelc"
        try FileManager.default.createDirectory(atPath: nn, withIntermediateDirectories: true)
        XCTAssertThrowsError(try ModelLoader.load(path: nn)) { error in
            XCTAssertTrue("\(error)".contains("without model.mil"), "\(error)")
        }
    }

    /// Apple-compiled text (facts §6.3 example) with no coremldata.bin or metadata.json: the
    /// description comes from the signature and its FlexibleShapeInformation.
    func testAppleTextWithoutDescriptionFiles() throws {
        let dir = try Fixtures.tempDir(self) + "/flex.mlmodelc"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Fixtures.path("miltext/apple_flexible_enumerated_multifunction.mil"), toPath: dir + "/model.mil")
        let m = try ModelLoader.load(path: dir)
        XCTAssertEqual(m.compiled?.descriptionSource, .functionSignatures)
        XCTAssertEqual(m.description.functions.map(\.name), ["first", "second"])
        XCTAssertEqual(m.description.defaultFunctionName, "first")
        XCTAssertEqual(m.description.functions[0].inputs[0].array?.flexibility, .enumerated([[4], [1], [2]]))
        XCTAssertEqual(m.description.functions[0].inputs[0].array?.shape, [4])
        XCTAssertEqual(m.description.functions[1].inputs[0].array?.flexibility, .range([SizeRange(lower: 1, upper: nil)]))
        XCTAssertEqual(m.specificationVersion, 9)
        XCTAssertTrue(m.program.functions.allSatisfy { $0.attributes.isEmpty }, "FlexibleShapeInformation moves into the description")
        guard case let .symbol(s) = m.program.functions[1].inputs[0].type.tensorType?.shape[0] else { return XCTFail("no symbol") }
        XCTAssertEqual(s.constraint, .range(lower: 1, upper: nil))
    }
}
