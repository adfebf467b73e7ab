import Foundation
import XCTest

/// Paths of the committed fixtures in `models-ir/` and scratch folders for tests.
public enum Fixtures {
    public static let repoRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()

    /// `models-ir/` with a trailing slash.
    public static var modelsDir: String { repoRoot + "/models-ir/" }

    public static func path(_ name: String) -> String { repoRoot + "/models-ir/" + name }

    /// Every `.mlpackage` / ML Program `.mlmodel` fixture with a reference JSON.
    public static var programFixtures: [String] {
        let dir = repoRoot + "/models-ir"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        return names.filter { ($0.hasSuffix(".mlpackage") || $0.hasSuffix(".mlmodel")) && $0 != "not_mlprogram.mlmodel" && !$0.hasPrefix("bad_") }.sorted()
    }

    public static func requireFixture(_ name: String) throws -> String {
        let p = path(name)
        guard FileManager.default.fileExists(atPath: p) else {
            XCTFail("fixture \(name) is missing: run tools/make_fixtures.py")
            throw XCTSkip("missing fixture")
        }
        return p
    }

    /// A fresh temporary folder, removed at the end of the test.
    public static func tempDir(_ test: XCTestCase) throws -> String {
        let dir = NSTemporaryDirectory() + "forge-ir-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        test.addTeardownBlock { try? FileManager.default.removeItem(atPath: dir) }
        return dir
    }

    /// Copies a fixture into a fresh temporary folder and returns the copy's path.
    public static func copy(_ name: String, into test: XCTestCase) throws -> String {
        let src = try requireFixture(name)
        let dst = try tempDir(test) + "/" + name
        try FileManager.default.copyItem(atPath: src, toPath: dst)
        return dst
    }

    public static let specSubpath = "/Data/com.apple.CoreML/model.mlmodel"
    public static let weightSubpath = "/Data/com.apple.CoreML/weights/weight.bin"
}
