import Foundation
import TestSupport
import XCTest

/// `docs/ARCHITECTURE.md`'s module graph is the one `Package.swift` declares.
final class ArchitectureDocTests: XCTestCase {
    /// target → dependencies, from `.target(name: "X", dependencies: [...])` declarations.
    static func packageGraph() throws -> [String: [String]] {
        let text = try String(contentsOfFile: Fixtures.repoRoot + "/Package.swift", encoding: .utf8)
        let decl = try NSRegularExpression(pattern: #"\.(target|executableTarget)\(\s*name:\s*"([^"]+)"(?:,\s*dependencies:\s*\[([^\]]*)\])?"#)
        var graph: [String: [String]] = [:]
        for m in decl.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
            let name = String(text[Range(m.range(at: 2), in: text)!])
            let deps = Range(m.range(at: 3), in: text).map { String(text[$0]) } ?? ""
            graph[name] = deps.split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines).trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }.filter { !$0.isEmpty }
        }
        return graph
    }

    static func documentedGraph() throws -> [String: [String]] {
        let text = try String(contentsOfFile: Fixtures.repoRoot + "/docs/ARCHITECTURE.md", encoding: .utf8)
        guard let a = text.range(of: "<!-- module-graph:begin -->"), let b = text.range(of: "<!-- module-graph:end -->") else { return [:] }
        var graph: [String: [String]] = [:]
        for line in text[a.upperBound..<b.lowerBound].split(separator: "\n") where line.contains("->") {
            let parts = line.components(separatedBy: "->")
            let deps = parts[1].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            graph[parts[0].trimmingCharacters(in: .whitespaces)] = deps
        }
        return graph
    }

    func testModuleGraphMatchesPackageSwift() throws {
        let declared = try Self.packageGraph(), documented = try Self.documentedGraph()
        XCTAssertFalse(declared.isEmpty)
        XCTAssertEqual(documented, declared, "update docs/ARCHITECTURE.md's module graph to match Package.swift")
    }
}
