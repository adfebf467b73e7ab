/// A syntax or meaning error in MIL text (`model.mil`), at a line and column of a file.
///
/// `description` is `file:line:column: message`, then the offending source line (a window of
/// at most ~100 characters around the column for long lines) and a caret under the column:
/// ```
/// model.mil:3:42: expected ',' or ')' after an operation argument, found 'y'
///             tensor<fp32, [4]> output = add(x = input y = constant);
///                                                      ^
/// ```
public struct MILTextError: Error, Equatable, CustomStringConvertible {
    public var file: String
    public var location: MILSourceLocation
    public var message: String
    /// The source line shown under the message (possibly shortened with `…`).
    public var excerpt: String
    /// Column of the caret inside `excerpt` (1-based, in characters of the excerpt).
    public var excerptColumn: Int

    public var line: Int { location.line }
    public var column: Int { location.column }

    /// `file:line:column: message` (one line).
    public var headline: String { "\(file):\(location.line):\(location.column): \(message)" }

    /// The excerpt and the caret line under it.
    public var caretLines: String {
        excerpt + "\n" + String(repeating: " ", count: max(0, excerptColumn - 1)) + "^"
    }

    public var description: String { headline + "\n" + caretLines }

    /// Builds the error for `location` in `source` (UTF-8 bytes of the whole text).
    init(file: String, location: MILSourceLocation, message: String, source: [UInt8]) {
        self.file = file
        self.location = location
        self.message = message
        var start = min(max(0, location.offset), source.count)
        var end = start
        while start > 0 && source[start - 1] != 0x0A { start -= 1 }
        while end < source.count && source[end] != 0x0A && source[end] != 0x0D { end += 1 }
        let caretAt = min(max(0, location.offset), source.count) - start
        // Keep long lines readable: at most 60 bytes before and 40 after the caret.
        let from = max(start, start + caretAt - 60), to = min(end, start + caretAt + 40)
        var text = String(decoding: source[from..<to], as: UTF8.self)
        text = String(text.map { $0 == "\t" ? " " : $0 })
        var column = String(decoding: source[from..<(start + caretAt)], as: UTF8.self).count + 1
        if from > start { text = "…" + text; column += 1 }
        if to < end { text += "…" }
        self.excerpt = text
        self.excerptColumn = column
    }
}
