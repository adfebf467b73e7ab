/// A position in MIL text: 1-based line and column (columns count UTF-8 bytes), and the byte
/// offset from the start of the text.
public struct MILSourceLocation: Hashable, Sendable, CustomStringConvertible {
    public var line: Int
    public var column: Int
    public var offset: Int

    public init(line: Int, column: Int, offset: Int) {
        self.line = line
        self.column = column
        self.offset = offset
    }

    public var description: String { "\(line):\(column)" }
}

/// One lexical token of `model.mil` text (see `MILLexer` for the token grammar).
struct MILToken: Equatable {
    enum Kind: Equatable {
        /// `[A-Za-z_][A-Za-z0-9_.]*` — keywords (`program`, `func`, `tensor`, `BLOBFILE`, dtype
        /// names, `true`, `false`), value and op names, parameter names, opset tags.
        case identifier
        /// A number exactly as written: decimal or `0x` integers, decimal or hexadecimal floats
        /// (`0x1.8p+3`), `inf`, `nan`, each with an optional leading `-` or `+`.
        case number
        /// A double-quoted string; `text` holds the decoded value.
        case string
        /// One of `( ) [ ] { } < > , = ; ?`.
        case punctuation
        /// `->`.
        case arrow
        /// `...` (a variadic dimension).
        case ellipsis
        case endOfFile
    }

    var kind: Kind
    /// Identifier or number spelling, decoded string value, or the punctuation character.
    var text: String
    var location: MILSourceLocation

    func isPunct(_ c: String) -> Bool { kind == .punctuation && text == c }
    func isIdentifier(_ s: String) -> Bool { kind == .identifier && text == s }

    /// How the token reads in an error message.
    var quoted: String {
        switch kind {
        case .endOfFile: return "end of file"
        case .string: return "string \(MILPrinter.quote(text))"
        case .arrow: return "'->'"
        case .ellipsis: return "'...'"
        default: return "'\(text)'"
        }
    }
}
