import Foundation
import JSON
import TestSupport
import XCTest

/// `JSONValue` against Python's `json` module (`tools/make_json_vectors.py` recorded what it
/// does with each input into `models-ir/json/vectors.json`).
final class JSONValueTests: XCTestCase {
    struct Vectors: Decodable {
        struct Quote: Decodable { var s: String; var ascii: String; var utf8: String }
        struct Parse: Decodable { var text: String; var canonical: String }
        struct Bad: Decodable { var text: String; var lineno: Int }
        var quote: [Quote]
        var parse: [Parse]
        var bad: [Bad]
    }

    /// Read with Foundation's decoder, so that the reference does not go through the parser
    /// under test.
    static let vectors: Vectors = {
        let url = URL(fileURLWithPath: Fixtures.path("json/vectors.json"))
        return try! JSONDecoder().decode(Vectors.self, from: Data(contentsOf: url))
    }()

    func testQuoteEqualsPythonDumps() {
        XCTAssertGreaterThanOrEqual(Self.vectors.quote.count, 9)
        for q in Self.vectors.quote {
            XCTAssertEqual(JSONValue.quote(q.s, ensureASCII: true), q.ascii, "ensure_ascii=True: \(q.s.debugDescription)")
            XCTAssertEqual(JSONValue.quote(q.s), q.utf8, "ensure_ascii=False: \(q.s.debugDescription)")
        }
    }

    func testParseThenRenderEqualsPythonCanonicalForm() throws {
        for p in Self.vectors.parse {
            let v = try JSONValue.parse(p.text)
            XCTAssertEqual(v.render(pretty: false), p.canonical, p.text)
        }
    }

    func testObjectsKeepTheirKeyOrderAndTheLastDuplicateValue() throws {
        let v = try JSONValue.parse(#"{"b": 1, "a": [true], "c": {"z": 1, "y": 2}, "b": 3}"#)
        guard case let .object(o) = v else { return XCTFail("not an object") }
        XCTAssertEqual(o.keys, ["b", "a", "c"])
        XCTAssertEqual(o["b"], .int(3))
        XCTAssertEqual(o["c"]?.objectValue?.keys, ["z", "y"])
        XCTAssertEqual(v.render(pretty: false, sortKeys: false), #"{"b":3,"a":[true],"c":{"z":1,"y":2}}"#)
        XCTAssertEqual(v.render(pretty: false), #"{"a":[true],"b":3,"c":{"y":2,"z":1}}"#)
    }

    func testEqualityIgnoresKeyOrder() throws {
        XCTAssertEqual(try JSONValue.parse(#"{"a": 1, "b": 2}"#), try JSONValue.parse(#"{"b": 2, "a": 1}"#))
        XCTAssertNotEqual(try JSONValue.parse(#"{"a": 1}"#), try JSONValue.parse(#"{"a": 2}"#))
    }

    func testWhatPythonRefusesIsRefusedOnTheSameLine() {
        XCTAssertGreaterThanOrEqual(Self.vectors.bad.count, 10)
        for b in Self.vectors.bad {
            XCTAssertThrowsError(try JSONValue.parse(b.text), b.text.debugDescription) { e in
                XCTAssertEqual((e as? JSONValue.ParseError)?.line, b.lineno, b.text.debugDescription)
            }
        }
    }

    func testDeepNestingIsAnErrorNotACrash() {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        XCTAssertThrowsError(try JSONValue.parse(deep)) { e in
            XCTAssertEqual((e as? JSONValue.ParseError)?.reason, "nesting too deep")
        }
    }
}

/// Hostile `\u` escapes: never a trap, the same text Python's `json.loads` gives (a lone
/// surrogate, which a Swift string cannot hold, as U+FFFD).
final class JSONEscapeHostileTests: XCTestCase {
    func testAHighSurrogateBeforeANonLowEscapeIsReplacedNotATrap() throws {
        // json.loads('"\\ud800\\u0041"') == '\ud800A'; '\ud800\ud800' stays two lone surrogates;
        // '\udbff\uffff' is a lone surrogate and U+FFFF.
        XCTAssertEqual(try JSONValue.parse(#""\uD800\u0041""#), .string("\u{FFFD}A"))
        XCTAssertEqual(try JSONValue.parse(#""\uDBFF\u0000""#), .string("\u{FFFD}\u{0}"))
        XCTAssertEqual(try JSONValue.parse(#""\uD800\uD800""#), .string("\u{FFFD}\u{FFFD}"))
        XCTAssertEqual(try JSONValue.parse(#""\uDBFF\uFFFF""#), .string("\u{FFFD}\u{FFFF}"))
        XCTAssertEqual(try JSONValue.parse(#""\uD83D\uDE00""#), .string("😀"))
    }

    func testAUEscapeTakesFourHexDigitsOnly() {
        // json.loads refuses these: "Invalid \uXXXX escape".
        for text in [#""\u+fff""#, #""\u-000""#, #""\u 123""#, #""\u12""#] {
            XCTAssertThrowsError(try JSONValue.parse(text), text) { e in
                XCTAssertEqual((e as? JSONValue.ParseError)?.reason, "bad \\u escape", text)
            }
        }
    }
}
