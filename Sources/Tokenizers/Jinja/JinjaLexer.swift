/// One token of a template: raw text between tags, tag delimiters, and the tokens inside tags.
struct JinjaToken: Equatable {
    enum Kind: Equatable {
        case text(String)
        case variableBegin, variableEnd, blockBegin, blockEnd
        case name(String)
        case string(String)
        case integer(Int)
        case float(Double)
        /// `+ - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { }`
        case op(String)
        case end
    }

    let kind: Kind
    let line: Int
}

/// Splits a template into tokens with Jinja2's lexer rules as transformers configures it
/// (`trim_blocks=True`, `lstrip_blocks=True`, `keep_trailing_newline=False`):
/// - `\r\n` and `\r` become `\n`; one trailing newline at the end of the source is dropped;
/// - `{%-` / `{{-` / `{#-` strip all whitespace before the tag, `-%}` / `-}}` / `-#}` all
///   whitespace after it;
/// - trim_blocks: the first newline after a block tag or comment is removed (not after `+%}`);
/// - lstrip_blocks: spaces and tabs from the start of a line up to a block tag or comment are
///   removed (not before `{%+`, never before `{{`).
/// Whitespace is Python's (`str.isspace`).
struct JinjaLexer {
    private let s: [Unicode.Scalar]
    private var pos = 0
    private var line = 1

    init(_ source: String) {
        var out: [Unicode.Scalar] = []
        out.reserveCapacity(source.unicodeScalars.count)
        var prevCR = false
        for u in source.unicodeScalars {
            if u == "\r" { out.append("\n"); prevCR = true; continue }
            if u == "\n" && prevCR { prevCR = false; continue }
            prevCR = false
            out.append(u)
        }
        if out.last == "\n" { out.removeLast() }
        s = out
    }

    static func isSpace(_ u: Unicode.Scalar) -> Bool {
        u.properties.isWhitespace || (0x1C...0x1F).contains(u.value)
    }

    private enum TagKind { case variable, block, comment }

    /// A piece of the first pass: text, or a tag with its whitespace controls.
    private enum Piece {
        case text([Unicode.Scalar], line: Int)
        case tag(TagKind, left: Unicode.Scalar?, right: Unicode.Scalar?, tokens: [JinjaToken], line: Int, endLine: Int)
    }

    /// - Throws: `JinjaError.syntax` for an unclosed tag, comment or string, or an unexpected
    ///   character.
    mutating func tokenize() throws -> [JinjaToken] {
        var pieces: [Piece] = []
        var textStart = 0, textLine = 1
        while pos < s.count {
            guard s[pos] == "{", pos + 1 < s.count, ["{", "%", "#"].contains(s[pos + 1]) else {
                if s[pos] == "\n" { line += 1 }
                pos += 1
                continue
            }
            if pos > textStart { pieces.append(.text(Array(s[textStart..<pos]), line: textLine)) }
            let kind: TagKind = s[pos + 1] == "{" ? .variable : (s[pos + 1] == "%" ? .block : .comment)
            let tagLine = line
            pos += 2
            var left: Unicode.Scalar?
            if pos < s.count, s[pos] == "-" || s[pos] == "+" { left = s[pos]; pos += 1 }
            if kind == .comment {
                let right = try skipComment(line: tagLine)
                pieces.append(.tag(.comment, left: left, right: right, tokens: [], line: tagLine, endLine: line))
            } else {
                let (tokens, right) = try lexTag(kind, line: tagLine)
                pieces.append(.tag(kind, left: left, right: right, tokens: tokens, line: tagLine, endLine: line))
                if kind == .block, tokens.first?.kind == .name("raw"), tokens.count == 1 {
                    try lexRaw(into: &pieces, line: tagLine)
                }
            }
            textStart = pos
            textLine = line
        }
        if pos > textStart { pieces.append(.text(Array(s[textStart..<pos]), line: textLine)) }
        return emit(pieces)
    }

    /// The content of `{% raw %}…{% endraw %}` as one text piece, then the endraw tag.
    private mutating func lexRaw(into pieces: inout [Piece], line tagLine: Int) throws {
        let start = pos, startLine = line
        while pos < s.count {
            if s[pos] == "{", pos + 1 < s.count, s[pos + 1] == "%" {
                var j = pos + 2
                var left: Unicode.Scalar?
                if j < s.count, s[j] == "-" || s[j] == "+" { left = s[j]; j += 1 }
                while j < s.count, Self.isSpace(s[j]) { j += 1 }
                let word = Array("endraw".unicodeScalars)
                if j + word.count <= s.count, Array(s[j..<(j + word.count)]) == word {
                    pieces.append(.text(Array(s[start..<pos]), line: startLine))
                    pos += 2 + (left == nil ? 0 : 1)
                    let tagLine = line
                    let (tokens, right) = try lexTag(.block, line: tagLine)
                    pieces.append(.tag(.block, left: left, right: right, tokens: tokens, line: tagLine, endLine: line))
                    return
                }
            }
            if s[pos] == "\n" { line += 1 }
            pos += 1
        }
        throw JinjaError.syntax(line: tagLine, message: "missing end of raw directive")
    }

    private mutating func skipComment(line tagLine: Int) throws -> Unicode.Scalar? {
        while pos + 1 < s.count {
            if s[pos] == "#" && s[pos + 1] == "}" {
                let right: Unicode.Scalar? = pos > 0 && (s[pos - 1] == "-" || s[pos - 1] == "+") ? s[pos - 1] : nil
                pos += 2
                return right
            }
            if s[pos] == "\n" { line += 1 }
            pos += 1
        }
        throw JinjaError.syntax(line: tagLine, message: "missing end of comment tag")
    }

    /// Tokens up to the closing `}}` / `%}` (found only outside brackets, as Jinja2's lexer
    /// balances them); returns the closing whitespace control.
    private mutating func lexTag(_ kind: TagKind, line tagLine: Int) throws -> ([JinjaToken], Unicode.Scalar?) {
        var tokens: [JinjaToken] = []
        var depth: [Unicode.Scalar] = []
        let close: Unicode.Scalar = kind == .variable ? "}" : "%"
        while true {
            while pos < s.count, Self.isSpace(s[pos]) {
                if s[pos] == "\n" { line += 1 }
                pos += 1
            }
            guard pos < s.count else {
                throw JinjaError.syntax(line: tagLine, message: kind == .variable ? "unexpected end of template, expected '}}'" : "unexpected end of template, expected '%}'")
            }
            let c = s[pos]
            if depth.isEmpty {
                if (c == "-" || c == "+"), pos + 2 < s.count, s[pos + 1] == close, s[pos + 2] == "}" {
                    pos += 3
                    return (tokens, c)
                }
                if c == close, pos + 1 < s.count, s[pos + 1] == "}" {
                    pos += 2
                    return (tokens, nil)
                }
            }
            let tokLine = line
            if c == "_" || c.properties.isAlphabetic && c.isASCII {
                var j = pos
                while j < s.count, s[j] == "_" || (s[j].isASCII && (s[j].properties.isAlphabetic || ("0"..."9").contains(s[j]))) { j += 1 }
                tokens.append(JinjaToken(kind: .name(String(String.UnicodeScalarView(s[pos..<j]))), line: tokLine))
                pos = j
                continue
            }
            if ("0"..."9").contains(c) {
                tokens.append(try lexNumber(line: tokLine))
                continue
            }
            if c == "'" || c == "\"" {
                tokens.append(JinjaToken(kind: .string(try lexString(quote: c, line: tokLine)), line: tokLine))
                continue
            }
            let two = pos + 1 < s.count ? String(String.UnicodeScalarView([c, s[pos + 1]])) : ""
            if ["//", "**", "==", "!=", "<=", ">="].contains(two) {
                tokens.append(JinjaToken(kind: .op(two), line: tokLine))
                pos += 2
                continue
            }
            let one = String(Character(c))
            guard "+-*/%~<>=.:|,()[]{};".unicodeScalars.contains(c) else {
                throw JinjaError.syntax(line: tokLine, message: "unexpected character '\(one)'")
            }
            switch c {
            case "(": depth.append(")")
            case "[": depth.append("]")
            case "{": depth.append("}")
            case ")", "]", "}":
                guard let expected = depth.popLast() else {
                    throw JinjaError.syntax(line: tokLine, message: "unexpected '\(one)'")
                }
                if expected != c {
                    throw JinjaError.syntax(line: tokLine, message: "unexpected '\(one)', expected '\(Character(expected))'")
                }
            default: break
            }
            tokens.append(JinjaToken(kind: .op(one), line: tokLine))
            pos += 1
        }
    }

    private mutating func lexNumber(line tokLine: Int) throws -> JinjaToken {
        var j = pos
        func digits() { while j < s.count, ("0"..."9").contains(s[j]) || (s[j] == "_" && j + 1 < s.count && ("0"..."9").contains(s[j + 1])) { j += 1 } }
        digits()
        var isFloat = false
        if j + 1 < s.count, s[j] == ".", ("0"..."9").contains(s[j + 1]) {
            isFloat = true
            j += 1
            digits()
        }
        if j < s.count, s[j] == "e" || s[j] == "E" {
            var k = j + 1
            if k < s.count, s[k] == "+" || s[k] == "-" { k += 1 }
            if k < s.count, ("0"..."9").contains(s[k]) {
                isFloat = true
                j = k
                digits()
            }
        }
        let text = String(String.UnicodeScalarView(s[pos..<j])).replacingOccurrences(of: "_", with: "")
        pos = j
        if isFloat {
            guard let d = Double(text) else { throw JinjaError.syntax(line: tokLine, message: "invalid number '\(text)'") }
            return JinjaToken(kind: .float(d), line: tokLine)
        }
        guard let i = Int(text) else { throw JinjaError.syntax(line: tokLine, message: "integer '\(text)' is too large") }
        return JinjaToken(kind: .integer(i), line: tokLine)
    }

    /// A string literal with Python's `unicode-escape` rules (`\n`, `\t`, `\\`, `\'`, `\"`,
    /// `\xhh`, `\uhhhh`, `\Uhhhhhhhh`, octal; an unknown escape keeps its backslash).
    private mutating func lexString(quote: Unicode.Scalar, line tokLine: Int) throws -> String {
        var out = String.UnicodeScalarView()
        pos += 1
        while pos < s.count {
            let c = s[pos]
            if c == quote { pos += 1; return String(out) }
            if c == "\n" { line += 1 }
            if c == "\\", pos + 1 < s.count {
                let e = s[pos + 1]
                pos += 2
                switch e {
                case "n": out.append("\n")
                case "t": out.append("\t")
                case "r": out.append("\r")
                case "\\": out.append("\\")
                case "'": out.append("'")
                case "\"": out.append("\"")
                case "a": out.append("\u{07}")
                case "b": out.append("\u{08}")
                case "f": out.append("\u{0C}")
                case "v": out.append("\u{0B}")
                case "\n": line += 1  // line continuation
                case "x", "u", "U":
                    let n = e == "x" ? 2 : (e == "u" ? 4 : 8)
                    guard pos + n <= s.count, let v = UInt32(String(String.UnicodeScalarView(s[pos..<(pos + n)])), radix: 16),
                          let u = Unicode.Scalar(v) else {
                        throw JinjaError.syntax(line: tokLine, message: "invalid \\\(Character(e)) escape in string")
                    }
                    out.append(u)
                    pos += n
                case "0"..."7":
                    var v = e.value - 48, k = 1
                    while k < 3, pos < s.count, ("0"..."7").contains(s[pos]) { v = v * 8 + s[pos].value - 48; pos += 1; k += 1 }
                    out.append(Unicode.Scalar(v)!)
                default:
                    out.append("\\")
                    out.append(e)
                    if e == "\n" { line += 1 }
                }
                continue
            }
            out.append(c)
            pos += 1
        }
        throw JinjaError.syntax(line: tokLine, message: "unterminated string")
    }

    /// Second pass: applies whitespace control to the text pieces and flattens.
    private func emit(_ pieces: [Piece]) -> [JinjaToken] {
        var out: [JinjaToken] = []
        var lineStarting = true
        var prevRight: (TagKind, Unicode.Scalar?)?
        for (i, piece) in pieces.enumerated() {
            switch piece {
            case let .text(raw, line):
                var text = ArraySlice(raw)
                var ls = lineStarting
                if let (kind, right) = prevRight {
                    if right == "-" {
                        while let f = text.first, Self.isSpace(f) { text.removeFirst() }
                    } else if kind != .variable && right != "+" && text.first == "\n" {
                        text.removeFirst()
                        ls = true
                    }
                }
                if i + 1 < pieces.count, case let .tag(nextKind, left, _, _, _, _) = pieces[i + 1] {
                    if left == "-" {
                        while let l = text.last, Self.isSpace(l) { text.removeLast() }
                    } else if left != "+" && nextKind != .variable {
                        let lPos = (text.lastIndex(of: "\n").map { $0 + 1 }) ?? text.startIndex
                        if lPos > text.startIndex || ls {
                            let tail = text[lPos...]
                            if !tail.isEmpty && tail.allSatisfy(Self.isSpace) { text = text[..<lPos] }
                        }
                    }
                }
                if !text.isEmpty { out.append(JinjaToken(kind: .text(String(String.UnicodeScalarView(text))), line: line)) }
                lineStarting = false
                prevRight = nil
            case let .tag(kind, _, right, tokens, line, endLine):
                if kind != .comment {
                    out.append(JinjaToken(kind: kind == .variable ? .variableBegin : .blockBegin, line: line))
                    out.append(contentsOf: tokens)
                    out.append(JinjaToken(kind: kind == .variable ? .variableEnd : .blockEnd, line: endLine))
                }
                prevRight = (kind, right)
                lineStarting = false
            }
        }
        return out
    }
}
