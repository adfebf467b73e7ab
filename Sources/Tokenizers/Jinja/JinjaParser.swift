/// Recursive-descent parser for the Jinja subset, with Jinja2's operator precedence (lowest
/// first): `x if c else y`, `or`, `and`, `not`, comparisons (`== != < <= > >= in not in`,
/// chained), `+ -`, `~`, `* / // %`, `**`, unary `- +`, then postfix `.attr [item] [a:b:c] (call)`
/// and the filters / tests (`| f`, `is t`) that bind to the unary operand.
struct JinjaParser {
    private let tokens: [JinjaToken]
    private var i = 0
    /// Nesting of statements and bracketed expressions, bounded so that a hostile template is a
    /// syntax error rather than a stack overflow.
    private var depth = 0
    static let maxNesting = 100

    private mutating func enter() throws {
        depth += 1
        if depth > Self.maxNesting { throw fail("nested more than \(Self.maxNesting) levels deep") }
    }

    init(_ tokens: [JinjaToken]) { self.tokens = tokens }

    /// - Throws: `JinjaError.syntax` naming the line.
    mutating func parseTemplate() throws -> [JinjaNode] {
        let (body, end) = try parseBody(until: [])
        if let end { throw JinjaError.syntax(line: end.line, message: "unexpected '\(end.name)'") }
        return body
    }

    // MARK: token helpers

    private var current: JinjaToken { i < tokens.count ? tokens[i] : JinjaToken(kind: .end, line: tokens.last?.line ?? 1) }

    private func peek(_ k: Int = 1) -> JinjaToken {
        i + k < tokens.count ? tokens[i + k] : JinjaToken(kind: .end, line: tokens.last?.line ?? 1)
    }

    private mutating func advance() { i += 1 }

    private func isOp(_ op: String) -> Bool { current.kind == .op(op) }
    private func isName(_ n: String) -> Bool { current.kind == .name(n) }

    private mutating func skip(op: String) -> Bool {
        if isOp(op) { advance(); return true }
        return false
    }

    private mutating func skip(name: String) -> Bool {
        if isName(name) { advance(); return true }
        return false
    }

    private func describe(_ t: JinjaToken) -> String {
        switch t.kind {
        case let .text(s): return "text '\(s.prefix(20))'"
        case .variableBegin: return "'{{'"
        case .variableEnd: return "end of print statement '}}'"
        case .blockBegin: return "'{%'"
        case .blockEnd: return "end of statement block '%}'"
        case let .name(n): return "'\(n)'"
        case let .string(s): return "string '\(s.prefix(20))'"
        case let .integer(v): return "integer \(v)"
        case let .float(v): return "number \(v)"
        case let .op(o): return "'\(o)'"
        case .end: return "end of template"
        }
    }

    private func fail(_ message: String) -> JinjaError { .syntax(line: current.line, message: message) }

    private mutating func expect(op: String) throws {
        guard skip(op: op) else { throw fail("expected '\(op)', got \(describe(current))") }
    }

    private mutating func expectName() throws -> String {
        guard case let .name(n) = current.kind else { throw fail("expected a name, got \(describe(current))") }
        advance()
        return n
    }

    private mutating func expectBlockEnd() throws {
        guard current.kind == .blockEnd else { throw fail("expected end of statement block '%}', got \(describe(current))") }
        advance()
    }

    // MARK: statements

    /// Nodes until a block tag whose first name is in `ends` (consumed up to its name; the
    /// caller parses the rest of that tag), or the end of the template.
    private mutating func parseBody(until ends: Set<String>) throws -> ([JinjaNode], (name: String, line: Int)?) {
        var nodes: [JinjaNode] = []
        while true {
            let t = current
            switch t.kind {
            case .end:
                return (nodes, nil)
            case let .text(s):
                nodes.append(.text(s))
                advance()
            case .variableBegin:
                advance()
                let e = try parseTuple()
                guard current.kind == .variableEnd else { throw fail("expected end of print statement '}}', got \(describe(current))") }
                advance()
                nodes.append(.output(e, line: t.line))
            case .blockBegin:
                guard case let .name(keyword) = peek().kind else {
                    throw JinjaError.syntax(line: peek().line, message: "expected a statement name, got \(describe(peek()))")
                }
                if ends.contains(keyword) {
                    advance(); advance()
                    return (nodes, (keyword, t.line))
                }
                advance(); advance()
                nodes.append(try parseStatement(keyword, line: t.line))
            default:
                throw fail("unexpected \(describe(t))")
            }
        }
    }

    private mutating func parseStatement(_ keyword: String, line: Int) throws -> JinjaNode {
        try enter()
        defer { depth -= 1 }
        switch keyword {
        case "if": return try parseIf(line: line)
        case "for": return try parseFor(line: line)
        case "set": return try parseSet(line: line)
        case "macro": return try parseMacro(line: line)
        case "filter":
            let (name, args, kwargs) = try parseFilterCall()
            try expectBlockEnd()
            let body = try parseBlock(ending: "endfilter", opened: "filter", line: line)
            return .filterBlock(name: name, args: args, kwargs: kwargs, body: body, line: line)
        case "break":
            try expectBlockEnd()
            return .breakLoop(line: line)
        case "continue":
            try expectBlockEnd()
            return .continueLoop(line: line)
        case "generation":
            // transformers' {% generation %} marks assistant tokens; it renders its body
            try expectBlockEnd()
            let body = try parseBlock(ending: "endgeneration", opened: "generation", line: line)
            return .ifBlock([(.literal(.bool(true)), body)], otherwise: [])
        case "raw":
            try expectBlockEnd()
            var text = ""
            if case let .text(s) = current.kind { text = s; advance() }
            guard current.kind == .blockBegin, peek().kind == .name("endraw") else { throw fail("missing end of raw directive") }
            advance(); advance()
            try expectBlockEnd()
            return .text(text)
        default:
            throw JinjaError.syntax(line: line, message: "unknown or unsupported tag '\(keyword)'")
        }
    }

    private mutating func parseBlock(ending: String, opened: String, line: Int) throws -> [JinjaNode] {
        let (body, end) = try parseBody(until: [ending])
        guard end != nil else {
            throw JinjaError.syntax(line: line, message: "unexpected end of template: '\(opened)' opened on line \(line) needs '\(ending)'")
        }
        try expectBlockEnd()
        return body
    }

    private mutating func parseIf(line: Int) throws -> JinjaNode {
        var branches: [(JinjaExpr, [JinjaNode])] = []
        var condition = try parseTuple()
        try expectBlockEnd()
        while true {
            let (body, end) = try parseBody(until: ["elif", "else", "endif"])
            branches.append((condition, body))
            guard let end else {
                throw JinjaError.syntax(line: line, message: "unexpected end of template: 'if' opened on line \(line) needs 'endif'")
            }
            switch end.name {
            case "elif":
                condition = try parseTuple()
                try expectBlockEnd()
            case "else":
                try expectBlockEnd()
                let otherwise = try parseBlock(ending: "endif", opened: "if", line: line)
                return .ifBlock(branches, otherwise: otherwise)
            default:
                try expectBlockEnd()
                return .ifBlock(branches, otherwise: [])
            }
        }
    }

    private mutating func parseFor(line: Int) throws -> JinjaNode {
        var targets: [String] = []
        let paren = skip(op: "(")
        repeat {
            if isName("in") { break }
            targets.append(try expectName())
        } while skip(op: ",")
        if paren { try expect(op: ")") }
        guard !targets.isEmpty else { throw fail("expected a loop variable") }
        guard skip(name: "in") else { throw fail("expected 'in', got \(describe(current))") }
        let iterable = try parseTuple(withCondition: false)
        var filter: JinjaExpr?
        if skip(name: "if") { filter = try parseExpression() }
        if isName("recursive") { throw fail("recursive loops are not supported") }
        try expectBlockEnd()
        let (body, end) = try parseBody(until: ["else", "endfor"])
        guard let end else {
            throw JinjaError.syntax(line: line, message: "unexpected end of template: 'for' opened on line \(line) needs 'endfor'")
        }
        try expectBlockEnd()
        var otherwise: [JinjaNode] = []
        if end.name == "else" { otherwise = try parseBlock(ending: "endfor", opened: "for", line: line) }
        return .forLoop(targets: targets, iterable: iterable, filter: filter, body: body, otherwise: otherwise, line: line)
    }

    private mutating func parseSetTarget() throws -> JinjaSetTarget {
        let first = try expectName()
        if skip(op: ".") {
            return .attribute(namespace: first, attribute: try expectName())
        }
        var names = [first]
        while skip(op: ",") { names.append(try expectName()) }
        return .names(names)
    }

    private mutating func parseSet(line: Int) throws -> JinjaNode {
        let target = try parseSetTarget()
        if skip(op: "=") {
            let value = try parseTuple()
            try expectBlockEnd()
            return .set(target, value, line: line)
        }
        var filters: [(String, [JinjaExpr], [(String, JinjaExpr)])] = []
        while skip(op: "|") { filters.append(try parseFilterCall()) }
        try expectBlockEnd()
        let body = try parseBlock(ending: "endset", opened: "set", line: line)
        return .setBlock(target, body: body, filters: filters, line: line)
    }

    private mutating func parseMacro(line: Int) throws -> JinjaNode {
        let name = try expectName()
        var params: [(String, JinjaExpr?)] = []
        try expect(op: "(")
        try commaSeparated(until: ")") { parser in
            let p = try parser.expectName()
            params.append((p, parser.skip(op: "=") ? try parser.parseExpression() : nil))
        }
        try expectBlockEnd()
        let body = try parseBlock(ending: "endmacro", opened: "macro", line: line)
        return .macro(name: name, parameters: params, body: body, line: line)
    }

    // MARK: expressions

    /// An expression, or a tuple `a, b` (a list value).
    private mutating func parseTuple(withCondition: Bool = true) throws -> JinjaExpr {
        let first = withCondition ? try parseExpression() : try parseOr()
        guard isOp(",") else { return first }
        var items = [first]
        while skip(op: ",") {
            if current.kind == .blockEnd || current.kind == .variableEnd || isName("if") { break }
            items.append(withCondition ? try parseExpression() : try parseOr())
        }
        return .list(items)
    }

    mutating func parseExpression() throws -> JinjaExpr {
        try enter()
        defer { depth -= 1 }
        let line = current.line
        var expr = try parseOr()
        while skip(name: "if") {
            let condition = try parseOr()
            let otherwise = skip(name: "else") ? try parseExpression() : nil
            expr = .conditional(then: expr, condition: condition, otherwise: otherwise, line: line)
        }
        return expr
    }

    /// One left-associative binary level (Jinja's parser: `or`, `and`, `+ -`, `~`, `* / // %`,
    /// `**`): operands from `next`, joined while `op` names an operator at the current token.
    private mutating func leftAssociative(_ next: (inout Self) throws -> JinjaExpr,
                                          _ op: (Self) -> String?) throws -> JinjaExpr {
        var left = try next(&self)
        while let o = op(self) {
            let line = current.line
            advance()
            left = .binary(o, left, try next(&self), line: line)
        }
        return left
    }

    /// Items separated by commas, a trailing comma allowed, up to the operator `close`, which is
    /// consumed: `item` parses one (lists, dicts, macro parameters, call arguments).
    private mutating func commaSeparated(until close: String, _ item: (inout Self) throws -> Void) throws {
        var first = true
        while !isOp(close) {
            if !first {
                try expect(op: ",")
                if isOp(close) { break }
            }
            first = false
            try item(&self)
        }
        try expect(op: close)
    }

    /// The current token's operator when it is one of `ops`.
    private func op(in ops: Set<String>) -> String? {
        if case let .op(o) = current.kind, ops.contains(o) { return o }
        return nil
    }

    private mutating func parseOr() throws -> JinjaExpr {
        try leftAssociative({ try $0.parseAnd() }, { $0.isName("or") ? "or" : nil })
    }

    private mutating func parseAnd() throws -> JinjaExpr {
        try leftAssociative({ try $0.parseNot() }, { $0.isName("and") ? "and" : nil })
    }

    private mutating func parseNot() throws -> JinjaExpr {
        if isName("not") {
            let line = current.line
            advance()
            return .unary("not", try parseNot(), line: line)
        }
        return try parseCompare()
    }

    private mutating func parseCompare() throws -> JinjaExpr {
        let line = current.line
        let first = try parseArithmetic()
        var ops: [(String, JinjaExpr)] = []
        while true {
            if case let .op(o) = current.kind, ["==", "!=", "<", "<=", ">", ">="].contains(o) {
                advance()
                ops.append((o, try parseArithmetic()))
            } else if isName("in") {
                advance()
                ops.append(("in", try parseArithmetic()))
            } else if isName("not"), peek().kind == .name("in") {
                advance(); advance()
                ops.append(("notin", try parseArithmetic()))
            } else {
                break
            }
        }
        return ops.isEmpty ? first : .compare(first, ops, line: line)
    }

    /// Jinja's arithmetic levels below the comparisons, loosest first: `+ -`, `~`, `* / // %`,
    /// `**` (each left-associative; below the last come unary operators and filters).
    private static let arithmeticLevels: [Set<String>] = [["+", "-"], ["~"], ["*", "/", "//", "%"], ["**"]]

    /// The expression at arithmetic level `level` (0: a comparison's operand).
    private mutating func parseArithmetic(_ level: Int = 0) throws -> JinjaExpr {
        guard level < Self.arithmeticLevels.count else { return try parseUnary() }
        return try leftAssociative({ try $0.parseArithmetic(level + 1) }, { $0.op(in: Self.arithmeticLevels[level]) })
    }

    private mutating func parseUnary(withFilter: Bool = true) throws -> JinjaExpr {
        let line = current.line
        var node: JinjaExpr
        if isOp("-") {
            advance()
            node = .unary("-", try parseUnary(withFilter: false), line: line)
        } else if isOp("+") {
            advance()
            node = .unary("+", try parseUnary(withFilter: false), line: line)
        } else {
            node = try parsePrimary()
        }
        node = try parsePostfix(node)
        if withFilter { node = try parseFilterExpr(node) }
        return node
    }

    private mutating func parsePrimary() throws -> JinjaExpr {
        let t = current
        switch t.kind {
        case let .name(n):
            advance()
            switch n {
            case "true", "True": return .literal(.bool(true))
            case "false", "False": return .literal(.bool(false))
            case "none", "None": return .literal(.none)
            default: return .name(n, line: t.line)
            }
        case .string:
            var buf = ""
            while case let .string(s) = current.kind { buf += s; advance() }  // adjacent literals concatenate
            return .literal(.string(buf))
        case let .integer(v):
            advance()
            return .literal(.int(v))
        case let .float(v):
            advance()
            return .literal(.double(v))
        case .op("("):
            advance()
            if skip(op: ")") { return .list([]) }
            let first = try parseExpression()
            if skip(op: ")") { return first }
            var items = [first]
            while skip(op: ",") {
                if isOp(")") { break }
                items.append(try parseExpression())
            }
            try expect(op: ")")
            return .list(items)
        case .op("["):
            advance()
            var items: [JinjaExpr] = []
            try commaSeparated(until: "]") { items.append(try $0.parseExpression()) }
            return .list(items)
        case .op("{"):
            advance()
            var pairs: [(JinjaExpr, JinjaExpr)] = []
            try commaSeparated(until: "}") { parser in
                let k = try parser.parseExpression()
                try parser.expect(op: ":")
                pairs.append((k, try parser.parseExpression()))
            }
            return .dict(pairs, line: t.line)
        default:
            throw fail("unexpected \(describe(t))")
        }
    }

    private mutating func parsePostfix(_ start: JinjaExpr) throws -> JinjaExpr {
        var node = start
        while true {
            let line = current.line
            if skip(op: ".") {
                switch current.kind {
                case let .name(n):
                    advance()
                    node = .getattr(node, n, line: line)
                case let .integer(v):
                    advance()
                    node = .getitem(node, .literal(.int(v)), line: line)
                default:
                    throw fail("expected name or number after '.'")
                }
            } else if isOp("[") {
                advance()
                node = try parseSubscript(node, line: line)
            } else if isOp("(") {
                let (args, kwargs) = try parseCallArgs()
                node = .call(node, args, kwargs, line: line)
            } else {
                return node
            }
        }
    }

    private mutating func parseSubscript(_ node: JinjaExpr, line: Int) throws -> JinjaExpr {
        var parts: [JinjaExpr?] = []
        var isSlice = false
        var cur: JinjaExpr?
        while !isOp("]") {
            if skip(op: ":") {
                isSlice = true
                parts.append(cur)
                cur = nil
                continue
            }
            if cur != nil { throw fail("expected ':' or ']' in subscript, got \(describe(current))") }
            cur = try parseExpression()
        }
        try expect(op: "]")
        guard isSlice else {
            guard let cur else { throw JinjaError.syntax(line: line, message: "expected subscript expression") }
            return .getitem(node, cur, line: line)
        }
        parts.append(cur)
        guard parts.count <= 3 else { throw JinjaError.syntax(line: line, message: "too many ':' in slice") }
        while parts.count < 3 { parts.append(nil) }
        return .slice(node, parts[0], parts[1], parts[2], line: line)
    }

    private mutating func parseCallArgs() throws -> ([JinjaExpr], [(String, JinjaExpr)]) {
        try expect(op: "(")
        var args: [JinjaExpr] = []
        var kwargs: [(String, JinjaExpr)] = []
        try commaSeparated(until: ")") { parser in
            if parser.isOp("*") || parser.isOp("**") { throw parser.fail("*args and **kwargs in calls are not supported") }
            if case let .name(n) = parser.current.kind, parser.peek().kind == .op("=") {
                parser.advance(); parser.advance()
                kwargs.append((n, try parser.parseExpression()))
            } else {
                guard kwargs.isEmpty else { throw parser.fail("positional argument after keyword argument") }
                args.append(try parser.parseExpression())
            }
        }
        return (args, kwargs)
    }

    private mutating func parseFilterCall() throws -> (String, [JinjaExpr], [(String, JinjaExpr)]) {
        var name = try expectName()
        while skip(op: ".") { name += "." + (try expectName()) }
        if isOp("(") {
            let (args, kwargs) = try parseCallArgs()
            return (name, args, kwargs)
        }
        return (name, [], [])
    }

    private mutating func parseFilterExpr(_ start: JinjaExpr) throws -> JinjaExpr {
        var node = start
        while true {
            let line = current.line
            if skip(op: "|") {
                let (name, args, kwargs) = try parseFilterCall()
                node = .filter(node, name, args, kwargs, line: line)
            } else if isName("is") {
                advance()
                let negated = skip(name: "not")
                var name = try expectName()
                while skip(op: ".") { name += "." + (try expectName()) }
                var args: [JinjaExpr] = []
                if isOp("(") {
                    let (a, kw) = try parseCallArgs()
                    guard kw.isEmpty else { throw fail("keyword arguments to tests are not supported") }
                    args = a
                } else {
                    var takesArgument = false
                    switch current.kind {
                    case let .name(n): takesArgument = !["else", "or", "and"].contains(n)
                    case .string, .integer, .float, .op("["), .op("{"): takesArgument = true
                    default: break
                    }
                    if takesArgument {
                        if isName("is") { throw fail("You cannot chain multiple tests with is") }
                        args = [try parsePostfix(try parsePrimary())]
                    }
                }
                node = .test(node, name, args, negated: negated, line: line)
            } else if isOp("(") {
                let (args, kwargs) = try parseCallArgs()
                node = .call(node, args, kwargs, line: line)
            } else {
                return node
            }
        }
    }
}
