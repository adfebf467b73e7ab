/// Splits `model.mil` text into tokens, one at a time (the text is never copied into a token
/// array, so memory stays proportional to the input).
///
/// Token grammar (our reading of the text Apple's Core ML compiler writes, facts sheet §9):
/// ```
/// identifier  = [A-Za-z_] [A-Za-z0-9_.]*
/// number      = [-+]? ( digits ('.' digits*)? ([eE] [-+]? digits)?
///                     | '0' [xX] hexdigits ('.' hexdigits*)? ([pP] [-+]? digits)?
///                     | 'inf' | 'nan' )        -- unsigned inf/nan lex as identifiers
/// string      = '"' ( [^"\\\n] | '\' ( '"' | '\' | 'n' | 't' | 'r' | '0' | "'" | 'x' hex hex ) )* '"'
/// punctuation = ( ) [ ] { } < > , = ; ?      arrow = '->'     ellipsis = '...'
/// comment     = '//' to end of line          whitespace = space, tab, CR, LF
/// ```
/// `\xNN` escapes are bytes; the decoded bytes of a string must be valid UTF-8.
struct MILLexer {
    let source: [UInt8]
    let file: String
    private(set) var offset = 0
    private(set) var line = 1
    private var lineStart = 0

    init(source: [UInt8], file: String) {
        self.source = source
        self.file = file
    }

    var location: MILSourceLocation {
        MILSourceLocation(line: line, column: offset - lineStart + 1, offset: offset)
    }

    func error(_ message: String, at location: MILSourceLocation) -> MILTextError {
        MILTextError(file: file, location: location, message: message, source: source)
    }

    private func peekByte(_ k: Int = 0) -> UInt8? {
        let i = offset + k
        return i < source.count ? source[i] : nil
    }

    private mutating func skipTrivia() {
        while let c = peekByte() {
            if c == 0x0A {
                offset += 1
                line += 1
                lineStart = offset
            } else if c == 0x20 || c == 0x09 || c == 0x0D {
                offset += 1
            } else if c == UInt8(ascii: "/"), peekByte(1) == UInt8(ascii: "/") {
                while let d = peekByte(), d != 0x0A { offset += 1 }
            } else {
                return
            }
        }
    }

    static func isIdentStart(_ c: UInt8) -> Bool {
        (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x5F
    }
    static func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }
    static func isHexDigit(_ c: UInt8) -> Bool {
        isDigit(c) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66)
    }
    static func isIdentBody(_ c: UInt8) -> Bool { isIdentStart(c) || isDigit(c) || c == 0x2E }

    /// The next token.
    /// - Throws: `MILTextError` for a character that starts no token, an unterminated string,
    ///   a bad escape, or a malformed number.
    mutating func next() throws -> MILToken {
        skipTrivia()
        let loc = location
        guard let c = peekByte() else { return MILToken(kind: .endOfFile, text: "", location: loc) }
        if Self.isIdentStart(c) {
            let start = offset
            while let d = peekByte(), Self.isIdentBody(d) { offset += 1 }
            return MILToken(kind: .identifier, text: String(decoding: source[start..<offset], as: UTF8.self), location: loc)
        }
        if Self.isDigit(c) { return try number(loc) }
        switch c {
        case UInt8(ascii: "-"), UInt8(ascii: "+"):
            if c == UInt8(ascii: "-"), peekByte(1) == UInt8(ascii: ">") {
                offset += 2
                return MILToken(kind: .arrow, text: "->", location: loc)
            }
            if let d = peekByte(1), Self.isDigit(d) || d == UInt8(ascii: "i") || d == UInt8(ascii: "n") {
                return try number(loc)
            }
            throw error("unexpected '\(Character(UnicodeScalar(c)))'", at: loc)
        case UInt8(ascii: "\""):
            return try string(loc)
        case UInt8(ascii: "."):
            if peekByte(1) == UInt8(ascii: "."), peekByte(2) == UInt8(ascii: ".") {
                offset += 3
                return MILToken(kind: .ellipsis, text: "...", location: loc)
            }
            throw error("unexpected '.'", at: loc)
        case UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "["), UInt8(ascii: "]"),
             UInt8(ascii: "{"), UInt8(ascii: "}"), UInt8(ascii: "<"), UInt8(ascii: ">"),
             UInt8(ascii: ","), UInt8(ascii: "="), UInt8(ascii: ";"), UInt8(ascii: "?"):
            offset += 1
            return MILToken(kind: .punctuation, text: String(UnicodeScalar(c)), location: loc)
        default:
            if c < 0x20 || c >= 0x7F {
                let hex = String(c, radix: 16, uppercase: true)
                throw error("unexpected byte 0x\(hex.count < 2 ? "0" : "")\(hex) outside a string", at: loc)
            }
            throw error("unexpected '\(Character(UnicodeScalar(c)))'", at: loc)
        }
    }

    private mutating func number(_ loc: MILSourceLocation) throws -> MILToken {
        let start = offset
        if let s = peekByte(), s == UInt8(ascii: "-") || s == UInt8(ascii: "+") { offset += 1 }
        func word(_ w: String) -> Bool {
            let bytes = Array(w.utf8)
            for (k, b) in bytes.enumerated() where peekByte(k) != b { return false }
            if let after = peekByte(bytes.count), Self.isIdentBody(after) { return false }
            return true
        }
        if word("inf") {
            offset += 3
        } else if word("nan") {
            offset += 3
        } else if peekByte() == UInt8(ascii: "0"), let x = peekByte(1), x == UInt8(ascii: "x") || x == UInt8(ascii: "X") {
            offset += 2
            let digitsStart = offset
            while let d = peekByte(), Self.isHexDigit(d) { offset += 1 }
            var any = offset > digitsStart
            if peekByte() == UInt8(ascii: ".") {
                offset += 1
                let fracStart = offset
                while let d = peekByte(), Self.isHexDigit(d) { offset += 1 }
                any = any || offset > fracStart
            }
            guard any else { throw error("hexadecimal number without digits", at: loc) }
            if let p = peekByte(), p == UInt8(ascii: "p") || p == UInt8(ascii: "P") {
                offset += 1
                try exponentDigits(loc)
            }
        } else {
            guard let d = peekByte(), Self.isDigit(d) else { throw error("malformed number", at: loc) }
            while let d = peekByte(), Self.isDigit(d) { offset += 1 }
            if peekByte() == UInt8(ascii: "."), peekByte(1) != UInt8(ascii: ".") {
                offset += 1
                while let d = peekByte(), Self.isDigit(d) { offset += 1 }
            }
            if let e = peekByte(), e == UInt8(ascii: "e") || e == UInt8(ascii: "E") {
                offset += 1
                try exponentDigits(loc)
            }
        }
        if let after = peekByte(), Self.isIdentBody(after) {
            throw error("malformed number '\(String(decoding: source[start...offset], as: UTF8.self))'", at: loc)
        }
        return MILToken(kind: .number, text: String(decoding: source[start..<offset], as: UTF8.self), location: loc)
    }

    private mutating func exponentDigits(_ loc: MILSourceLocation) throws {
        if let s = peekByte(), s == UInt8(ascii: "-") || s == UInt8(ascii: "+") { offset += 1 }
        let start = offset
        while let d = peekByte(), Self.isDigit(d) { offset += 1 }
        guard offset > start else { throw error("number with an exponent but no exponent digits", at: loc) }
    }

    private mutating func string(_ loc: MILSourceLocation) throws -> MILToken {
        offset += 1
        var bytes: [UInt8] = []
        while true {
            guard let c = peekByte() else { throw error("unterminated string", at: loc) }
            if c == 0x0A { throw error("unterminated string (a string cannot span lines; write \\n)", at: loc) }
            offset += 1
            if c == UInt8(ascii: "\"") { break }
            if c != UInt8(ascii: "\\") { bytes.append(c); continue }
            let escLoc = MILSourceLocation(line: line, column: offset - lineStart, offset: offset - 1)
            guard let e = peekByte() else { throw error("unterminated string", at: loc) }
            offset += 1
            switch e {
            case UInt8(ascii: "\""): bytes.append(0x22)
            case UInt8(ascii: "\\"): bytes.append(0x5C)
            case UInt8(ascii: "'"): bytes.append(0x27)
            case UInt8(ascii: "n"): bytes.append(0x0A)
            case UInt8(ascii: "t"): bytes.append(0x09)
            case UInt8(ascii: "r"): bytes.append(0x0D)
            case UInt8(ascii: "0"): bytes.append(0x00)
            case UInt8(ascii: "x"):
                guard let h = peekByte(), let l = peekByte(1), Self.isHexDigit(h), Self.isHexDigit(l) else {
                    throw error("\\x escape needs two hexadecimal digits", at: escLoc)
                }
                offset += 2
                bytes.append(UInt8(String(decoding: [h, l], as: UTF8.self), radix: 16)!)
            default:
                throw error("unknown escape '\\\(Character(UnicodeScalar(e)))' in a string (known: \\\" \\\\ \\n \\t \\r \\0 \\' \\xNN)", at: escLoc)
            }
        }
        let decoded = String(decoding: bytes, as: UTF8.self)
        guard decoded.utf8.elementsEqual(bytes) else { throw error("string is not valid UTF-8", at: loc) }
        return MILToken(kind: .string, text: decoded, location: loc)
    }
}
