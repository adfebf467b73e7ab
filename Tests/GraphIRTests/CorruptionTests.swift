import Foundation
import TestSupport
import XCTest
@testable import GraphIR


/// Truncates and flips bytes of `model.mlmodel` and `weight.bin` hundreds of times; every
/// load must give a typed `ModelError` or a valid model — never a crash, hang or runaway
/// allocation. A model that loads is also walked (constants decoded) to exercise lazy reads.
final class CorruptionTests: XCTestCase {
    enum Target { case spec, weights }

    func mutate(_ original: Data, rng: inout SplitMix64) -> (Data, String) {
        var d = original
        switch Int.random(in: 0..<5, using: &rng) {
        case 0:
            let n = Int.random(in: 0..<d.count, using: &rng)
            return (d.prefix(n), "truncate to \(n)")
        case 1:
            let flips = Int.random(in: 1...8, using: &rng)
            for _ in 0..<flips {
                let i = Int.random(in: 0..<d.count, using: &rng)
                d[i] ^= UInt8(1 << Int.random(in: 0..<8, using: &rng))
            }
            return (d, "flip \(flips) bits")
        case 2:
            let i = Int.random(in: 0..<d.count, using: &rng)
            d[i] = [0x00, 0xFF, 0x7F, 0x80][Int.random(in: 0..<4, using: &rng)]
            return (d, "set byte \(i)")
        case 3:
            // Overwrite a run with random bytes.
            let i = Int.random(in: 0..<d.count, using: &rng)
            let n = min(d.count - i, Int.random(in: 1...16, using: &rng))
            for k in 0..<n { d[i + k] = UInt8.random(in: 0...255, using: &rng) }
            return (d, "scramble \(n) bytes at \(i)")
        default:
            // A varint length near the start set huge.
            let i = Int.random(in: 0..<min(d.count, 64), using: &rng)
            d[i] = 0xFF
            return (d, "0xFF at \(i)")
        }
    }

    func exercise(_ model: Model) {
        for f in model.program.functions {
            f.body.walk { op in
                for a in op.attributes { _ = a.value.doubles() }
                for i in op.inputs { for o in i.operands { _ = o.constant?.doubles() } }
            }
        }
    }

    func run(_ fixture: String, target: Target, count: Int, seed: UInt64) throws {
        let pkg = try Fixtures.copy(fixture, into: self)
        let file = pkg + (target == .spec ? Fixtures.specSubpath : Fixtures.weightSubpath)
        let url = URL(fileURLWithPath: file)
        let original = try Data(contentsOf: url)
        var rng = SplitMix64(seed: seed)
        var typed = 0, loaded = 0
        for i in 0..<count {
            let (mutated, what) = mutate(original, rng: &rng)
            try mutated.write(to: url)
            do {
                let m = try ModelLoader.load(path: pkg)
                exercise(m)
                loaded += 1
            } catch is ModelError {
                typed += 1
            } catch {
                XCTFail("mutation \(i) (\(what)) threw an untyped error: \(error)")
            }
        }
        try original.write(to: url)
        XCTAssertEqual(typed + loaded, count)
        // The mutations must actually reach the error paths.
        XCTAssertGreaterThan(typed, count / 10, "too few mutations were rejected (\(typed)/\(count))")
    }

    func testSpecMutations() throws {
        try run("tiny_llama_int8.mlpackage", target: .spec, count: 300, seed: 1)
    }

    func testWeightMutations() throws {
        try run("tiny_llama_int8.mlpackage", target: .weights, count: 300, seed: 2)
    }
}
