@testable import Interpreter
import XCTest

/// ``WordTable`` (the pool's open-addressing map) against Swift's `Dictionary` as the
/// reference, under seeded random inserts, increments and removals — keys drawn from a small
/// range so probe runs collide, wrap around the table's end and are shifted back on removal.
final class WordTableTests: XCTestCase {
    func testRandomOperationsMatchDictionary() {
        var rng = SplitMix64(seed: 18)
        for keyRange in [UInt(40), 500, 1 << 40] {
            let table = WordTable(capacity: 16)
            var reference: [UInt: Int] = [:]
            for step in 0..<20_000 {
                let k = UInt.random(in: 1...keyRange, using: &rng) &* 16  // addresses are 16-byte aligned
                switch Int.random(in: 0..<4, using: &rng) {
                case 0:
                    let v = Int.random(in: -5...5, using: &rng)
                    table.set(k, v)
                    reference[k] = v
                case 1:
                    let d = Int.random(in: -3...3, using: &rng)
                    let got = table.add(k, d)
                    reference[k, default: 0] += d
                    XCTAssertEqual(got, reference[k])
                default:
                    table.remove(k)
                    reference[k] = nil
                }
                if step % 997 == 0 {
                    XCTAssertEqual(table.count, reference.count)
                    for (key, v) in reference { XCTAssertEqual(table.value(key), v, "key \(key) at step \(step)") }
                }
                XCTAssertEqual(table.value(k), reference[k], "key \(k) at step \(step)")
            }
            XCTAssertEqual(table.count, reference.count)
            XCTAssertEqual(Dictionary(uniqueKeysWithValues: table.entries.map { ($0.key, $0.value) }), reference)
            table.removeAll()
            XCTAssertEqual(table.count, 0)
            for key in reference.keys { XCTAssertNil(table.value(key)) }
        }
    }

    /// Key 0 marks an empty cell: it is never stored.
    func testZeroKeyIsIgnored() {
        let table = WordTable()
        table.set(0, 7)
        XCTAssertEqual(table.add(0, 1), 0)
        XCTAssertNil(table.value(0))
        XCTAssertEqual(table.count, 0)
    }
}
