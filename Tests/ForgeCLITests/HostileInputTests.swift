import Foundation
import GraphIR
import Interpreter
import TestSupport
import XCTest

/// The robustness suite of issue #11: every case of `models-ir/hostile/manifest.json`
/// (structured mutations of small coremltools models, written by
/// `tools/make_hostile_fixtures.py`) is run through the CLI under a 60 s timeout, a 4 GiB
/// address-space limit and `--max-memory 512M`, and must end with the exit code and the error
/// text the manifest names — never a signal, a hang, or an allocation the limit kills. One
/// test per class of hostile input, plus the cases a committed file cannot hold (FIFOs,
/// output folders, interrupted writes).
final class HostileInputTests: XCTestCase {
    static let root = CLITests.repoRoot
    static let hostile = root + "/models-ir/hostile/"

    struct Case {
        var cls: String
        var name: String
        var args: [String]
        var exit: Int32
        var stderr: String?
    }

    static let cases: [Case] = {
        guard let data = FileManager.default.contents(atPath: hostile + "manifest.json"),
              let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let list = json["cases"] as? [[String: Any]] else { return [] }
        return list.compactMap { c in
            guard let cls = c["class"] as? String, let name = c["name"] as? String,
                  let args = c["args"] as? [String], let exit = c["exit"] as? Int else { return nil }
            return Case(cls: cls, name: name, args: args, exit: Int32(exit), stderr: c["stderr"] as? String)
        }
    }()

    struct Outcome {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs forge-ir under `timeout` and `ulimit -v` (4 GiB). Status 124 = timed out, > 128 = a signal.
    func runLimited(_ args: [String], seconds: Int = 60) throws -> Outcome {
        guard let bin = CLITests.binary else { throw XCTSkip("forge-ir binary not found; set FORGE_IR_BIN") }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", "ulimit -v 4194304; exec timeout -k 5 \(seconds) \"$0\" \"$@\"", bin] + args
        p.currentDirectoryURL = URL(fileURLWithPath: Self.root)
        let dir = NSTemporaryDirectory() + "forge-ir-hostile-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for (n, _) in [("out", 1), ("err", 2)] { _ = FileManager.default.createFile(atPath: "\(dir)/\(n)", contents: nil) }
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: dir + "/out"))
        let err = try FileHandle(forWritingTo: URL(fileURLWithPath: dir + "/err"))
        p.standardOutput = out
        p.standardError = err
        try p.run()
        p.waitUntilExit()
        try out.close()
        try err.close()
        func text(_ n: String) -> String { String(decoding: FileManager.default.contents(atPath: "\(dir)/\(n)") ?? Data(), as: UTF8.self) }
        return Outcome(status: p.terminationStatus, stdout: text("out"), stderr: text("err"))
    }

    func check(_ c: Case, file: StaticString = #filePath, line: UInt = #line) throws {
        let tmp = NSTemporaryDirectory() + "forge-ir-hostile-out-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: tmp) }
        let model = c.name.hasPrefix("/") ? c.name : Self.hostile + c.name
        var args = c.args.map { a -> String in
            if a == "MODEL" { return model }
            return a.replacingOccurrences(of: "INPUTS/", with: Self.hostile + "inputs/")
                .replacingOccurrences(of: "MODELS/", with: Self.root + "/models-ir/")
                .replacingOccurrences(of: "TMP/", with: tmp + "/")
                .replacingOccurrences(of: "=MODEL", with: "=" + model)
        }
        if !args.contains("--max-memory") { args += ["--max-memory", "512M"] }
        let r = try runLimited(args)
        let what = "\(c.cls): \(c.name) \(c.args.first ?? "")"
        XCTAssertLessThan(r.status, 124, "\(what): timed out or died of a signal (status \(r.status)); stderr: \(r.stderr)", file: file, line: line)
        XCTAssertEqual(r.status, c.exit, "\(what): stderr: \(r.stderr)", file: file, line: line)
        if let s = c.stderr { XCTAssertTrue(r.stderr.contains(s), "\(what): stderr lacks '\(s)': \(r.stderr)", file: file, line: line) }
        if c.exit == 1 {
            let lines = r.stderr.split(separator: "\n")
            XCTAssertEqual(lines.filter { $0.hasPrefix("forge-ir: error: ") }.count, 1, "\(what): one error line expected: \(r.stderr)", file: file, line: line)
            XCTAssertFalse(r.stderr.contains("NSCocoaErrorDomain"), "\(what): raw Foundation error text: \(r.stderr)", file: file, line: line)
        }
    }

    func checkClass(_ cls: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let selected = Self.cases.filter { $0.cls == cls }
        guard !selected.isEmpty else { throw XCTSkip("no '\(cls)' cases in models-ir/hostile/manifest.json (tools/make_hostile_fixtures.py)") }
        for c in selected { try check(c, file: file, line: line) }
    }

    // MARK: - one test per class (manifest cases)

    /// `cond` in `cond` 5000 deep and list types 5000 deep: refused by the wire-format scan
    /// before protobuf-c recurses (before: SIGSEGV in the unpacker); 70 deep: the decoder's limit.
    func testDeepNesting() throws { try checkClass("deep nesting") }

    /// Dims 2^32 × 2^32, rank 64 of 2s, description shapes overflowing, reshape to 2^31−1 ×
    /// 2^31−1 × 4, tile reps overflowing: typed errors (before: traps in printer / kernels).
    func testOverflowingCounts() throws { try checkClass("overflowing counts") }

    /// A deflate member declaring 4 GiB, a deflate bomb (honest and lying sizes), tile reps of
    /// 2^31−1, an .npy declaring 2^62 elements, `/dev/zero` as the spec, and folding of a huge
    /// tile by `optimize`: refused by the memory budget or by what the file can hold.
    func testAllocationFromDeclaredSizes() throws { try checkClass("allocation from declared sizes") }

    /// Central-directory entries at the end of the file with empty / short zip64 extras, and an
    /// extra running past the end: errors naming the member (before: index out of range).
    func testZipEdgeCases() throws { try checkClass("zip edge cases") }

    /// int64 beyond int32 refused without `--allow-lossy-inputs`, a warning with it.
    func testSilentInputConversions() throws { try checkClass("silent input conversions") }

    /// No functions, no outputs, negative description dims, RangeDim lower > upper, empty
    /// EnumeratedShapes, unknown op types, blobs overlapping the header, the header's blob count,
    /// weight paths outside the package: refused by every verb.
    func testAcceptedButInvalid() throws { try checkClass("accepted but invalid") }

    /// The unmutated package of the same recipe loads, dumps and diagnoses (exit 0).
    func testValidBaseline() throws { try checkClass("valid") }

    /// An index error after the converter's own cast names the input the indices come from.
    func testIndexErrorNamesInput() throws { try checkClass("messages") }

    // MARK: - files that are not regular files

    func testFIFOsNeverBlock() throws {
        let dir = NSTemporaryDirectory() + "forge-ir-fifo-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // model.mlmodel as a FIFO.
        XCTAssertEqual(mkfifo(dir + "/model.mlmodel", 0o644), 0)
        for verb in ["dump", "diagnose", "run", "optimize"] {
            var args = [verb, dir + "/model.mlmodel"]
            if verb == "optimize" { args += ["-o", dir + "/o.mlpackage"] }
            let r = try runLimited(args, seconds: 20)
            XCTAssertEqual(r.status, 1, "\(verb): \(r.stderr)")
            XCTAssertTrue(r.stderr.contains("FIFO"), r.stderr)
        }
        // A package whose weight.bin is a FIFO.
        let pkg = dir + "/p.mlpackage"
        try FileManager.default.copyItem(atPath: Self.hostile + "valid_blob.mlpackage", toPath: pkg)
        let weights = pkg + "/Data/com.apple.CoreML/weights/weight.bin"
        try FileManager.default.removeItem(atPath: weights)
        XCTAssertEqual(mkfifo(weights, 0o644), 0)
        let r = try runLimited(["dump", pkg], seconds: 20)
        XCTAssertEqual(r.status, 1, r.stderr)
        XCTAssertTrue(r.stderr.contains("weight file is a FIFO"), r.stderr)
        // An input .npy and a Manifest.json as FIFOs.
        XCTAssertEqual(mkfifo(dir + "/x.npy", 0o644), 0)
        let r2 = try runLimited(["run", Self.root + "/models-ir/tiny_inline.mlmodel", "--input", "x=" + dir + "/x.npy"], seconds: 20)
        XCTAssertEqual(r2.status, 1, r2.stderr)
        XCTAssertTrue(r2.stderr.contains("FIFO"), r2.stderr)
        try FileManager.default.removeItem(atPath: pkg + "/Manifest.json")
        XCTAssertEqual(mkfifo(pkg + "/Manifest.json", 0o644), 0)
        let r3 = try runLimited(["dump", pkg], seconds: 20)
        XCTAssertEqual(r3.status, 1, r3.stderr)
        XCTAssertTrue(r3.stderr.contains("FIFO"), r3.stderr)
    }

    // MARK: - input conversions

    /// fp64 / fp32 data for an fp16 input is rounded to fp16 once, from its own precision, as
    /// Core ML converts it (numpy's `astype(float16)`, recorded by the generator): the first
    /// value of x_fp64 differs when rounded through fp32 (double rounding).
    func testFP16InputRoundedLikeCoreML() throws {
        guard let data = FileManager.default.contents(atPath: Self.hostile + "fp16_int32_inputs.reference.json"),
              let ref = try JSONSerialization.jsonObject(with: data) as? [String: Any] else { throw XCTSkip("no reference") }
        for tag in ["fp64", "fp32"] {
            let out = NSTemporaryDirectory() + "forge-ir-fp16-" + UUID().uuidString
            defer { try? FileManager.default.removeItem(atPath: out) }
            let r = try runLimited(["run", Self.hostile + "fp16_int32_inputs.mlmodel",
                                    "--input", "x=\(Self.hostile)inputs/x_\(tag).npy",
                                    "--input", "i=\(Self.hostile)inputs/i_int64_small.npy", "--out", out])
            XCTAssertEqual(r.status, 0, r.stderr)
            let y = try NPY.read(path: out + "/y.npy").floats.map(Double.init)
            let expected = ((ref["y_from_\(tag)"] as? [[Double]]) ?? []).flatMap { $0 }
            XCTAssertEqual(y, expected, "y from \(tag) input")
            XCTAssertEqual(try NPY.read(path: out + "/j.npy").ints, [6, -6])
        }
    }

    /// A state file of a wider dtype than its fp16 state is refused (a warning with
    /// `--allow-lossy-inputs`); a folder missing some states or holding other files warns.
    func testStateFolderConversionsAndWarnings() throws {
        let model = Self.root + "/models-ir/tiny_llama_fp16.mlpackage"
        let inputs = Self.root + "/models-ir/inputs/tiny_llama_fp16.npz"
        let dir = NSTemporaryDirectory() + "forge-ir-states-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r0 = try runLimited(["run", model, "--inputs", inputs, "--state-out", dir])
        XCTAssertEqual(r0.status, 0, r0.stderr)
        let names = try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
        XCTAssertGreaterThan(names.count, 1)
        // One state rewritten as fp32, one removed, one stray file.
        let first = dir + "/" + names[0]
        let t = try NPY.read(path: first)
        try NPY.encode(Tensor(.fp32, shape: t.shape, floats: t.floats)).write(to: URL(fileURLWithPath: first))
        try FileManager.default.removeItem(atPath: dir + "/" + names[1])
        _ = FileManager.default.createFile(atPath: dir + "/notes.txt", contents: Data("x".utf8))
        let r1 = try runLimited(["run", model, "--inputs", inputs, "--state-in", dir])
        XCTAssertEqual(r1.status, 1, r1.stderr)
        XCTAssertTrue(r1.stderr.contains("fp32 data for fp16 state"), r1.stderr)
        XCTAssertTrue(r1.stderr.contains("--allow-lossy-inputs"), r1.stderr)
        let r2 = try runLimited(["run", model, "--inputs", inputs, "--state-in", dir, "--allow-lossy-inputs"])
        XCTAssertEqual(r2.status, 0, r2.stderr)
        XCTAssertTrue(r2.stderr.contains("warning: "), r2.stderr)
        XCTAssertTrue(r2.stderr.contains(String(names[1].dropLast(4))), "names the missing state: \(r2.stderr)")
        XCTAssertTrue(r2.stderr.contains("notes.txt"), "names the stray file: \(r2.stderr)")
    }

    // MARK: - output safety

    func testOptimizeNeverDeletesUserFiles() throws {
        let dir = NSTemporaryDirectory() + "forge-ir-out-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let model = Self.root + "/models-ir/tiny_inline.mlmodel"
        // A folder of user files named like a package, even with a Manifest.json: refused, untouched.
        let user = dir + "/mine.mlpackage"
        try FileManager.default.createDirectory(atPath: user, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: user + "/thesis.tex", contents: Data("keep".utf8))
        _ = FileManager.default.createFile(atPath: user + "/Manifest.json", contents: Data("{}".utf8))
        let r1 = try runLimited(["optimize", model, "-o", user])
        XCTAssertEqual(r1.status, 1, r1.stderr)
        XCTAssertTrue(r1.stderr.contains("--force"), r1.stderr)
        XCTAssertEqual(r1.stderr.components(separatedBy: user).count - 1, 1, "the path once: \(r1.stderr)")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: user).sorted(), ["Manifest.json", "thesis.tex"])
        // With --force it is replaced.
        let r2 = try runLimited(["optimize", model, "-o", user, "--force"])
        XCTAssertEqual(r2.status, 0, r2.stderr)
        XCTAssertNoThrow(try ModelLoader.load(path: user))
        // A package forge-ir wrote is replaced, and it says so.
        let r3 = try runLimited(["optimize", model, "-o", user])
        XCTAssertEqual(r3.status, 0, r3.stderr)
        XCTAssertTrue(r3.stderr.contains("replaced the existing package"), r3.stderr)
        // A package with a stray file is not.
        _ = FileManager.default.createFile(atPath: user + "/Data/notes.txt", contents: Data("keep".utf8))
        let r4 = try runLimited(["optimize", model, "-o", user])
        XCTAssertEqual(r4.status, 1, r4.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: user + "/Data/notes.txt"))
    }

    /// `.tmp-*` / `.old-*` folders left by a killed write are cleaned by the next run; an
    /// `.old-*` whose package is missing (killed between the two renames) is restored.
    func testStaleTemporariesCleaned() throws {
        let dir = NSTemporaryDirectory() + "forge-ir-stale-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let model = Self.root + "/models-ir/tiny_inline.mlmodel"
        let out = dir + "/o.mlpackage"
        XCTAssertEqual(try runLimited(["optimize", model, "-o", out]).status, 0)
        // Killed between "move the old package aside" and "rename the new one in": restored.
        try FileManager.default.moveItem(atPath: out, toPath: out + ".old-k3x9")
        try FileManager.default.createDirectory(atPath: out + ".tmp-a1b2c3/Data", withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: dir + "/o.mlpackage.notes", contents: Data("keep".utf8))
        XCTAssertEqual(OutputSafety.cleanStaleTemporaries(of: out).count, 2)
        XCTAssertTrue(FileManager.default.fileExists(atPath: out + "/Manifest.json"))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir).sorted(), ["o.mlpackage", "o.mlpackage.notes"])
        // Leftovers next to an existing package are removed by the next optimize.
        try FileManager.default.createDirectory(atPath: out + ".old-zz9", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: out + ".tmp-q7", withIntermediateDirectories: true)
        XCTAssertEqual(try runLimited(["optimize", model, "-o", out]).status, 0)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir).sorted(), ["o.mlpackage", "o.mlpackage.notes"])
    }

    // MARK: - messages

    func testNoRawFoundationErrorText() throws {
        let r = try runLimited(["run", Self.root + "/models-ir/tiny_inline.mlmodel",
                                "--inputs", Self.root + "/models-ir/inputs/tiny_inline.npz", "--out", "/proc/forge-ir-cannot/out"])
        XCTAssertEqual(r.status, 1, r.stderr)
        XCTAssertFalse(r.stderr.contains("NSCocoaErrorDomain"), r.stderr)
        XCTAssertFalse(r.stderr.contains("The operation could not be completed"), r.stderr)
        XCTAssertTrue(r.stderr.contains("/proc/forge-ir-cannot"), r.stderr)
    }

    func testMaxMemoryUsage() throws {
        let r = try runLimited(["dump", Self.root + "/models-ir/tiny_inline.mlmodel", "--max-memory", "lots"])
        XCTAssertEqual(r.status, 64, r.stderr)
        XCTAssertTrue(r.stderr.contains("--max-memory"), r.stderr)
    }
}
