import Foundation

/// Variables visible at one point of a render: a loop body or a macro call opens a child scope
/// (so `{% set %}` inside a loop does not leak out, as in Jinja2; `namespace()` is the way out).
final class JinjaScope {
    private var vars: [String: JinjaValue] = [:]
    let parent: JinjaScope?

    init(parent: JinjaScope?, _ vars: [String: JinjaValue] = [:]) {
        self.parent = parent
        self.vars = vars
    }

    func lookup(_ name: String) -> JinjaValue? {
        var s: JinjaScope? = self
        while let cur = s {
            if let v = cur.vars[name] { return v }
            s = cur.parent
        }
        return nil
    }

    func set(_ name: String, _ value: JinjaValue) { vars[name] = value }
}

/// Renders parsed nodes. Output goes to one buffer; `break` / `continue` travel up as `Flow`.
struct JinjaEvaluator {
    enum Flow { case normal, breakLoop, continueLoop }

    /// Guards against runaway templates (a macro calling itself forever): calls nest at most
    /// this deep (Python would stop at its recursion limit).
    static let maxDepth = 64

    /// Bounds that keep a hostile or broken template from hanging or eating memory: loop
    /// iterations and macro calls per render, and the size of the text and of any one string.
    static let maxOutputBytes = 64 << 20

    /// Shared by the evaluators of one render (a macro call runs its own evaluator).
    final class State {
        var depth = 0
        var steps = 0
        let maxSteps: Int
        init(maxSteps: Int = JinjaTemplate.defaultMaxSteps) { self.maxSteps = maxSteps }
        func step(_ line: Int) throws {
            steps += 1
            if steps > maxSteps {
                throw JinjaError.runtime(line: line, message: "rendering took more than \(maxSteps) loop iterations and macro calls")
            }
        }
    }
    let state: State

    init(state: State = State()) { self.state = state }

    mutating func render(_ nodes: [JinjaNode], scope: JinjaScope) throws -> String {
        var out = ""
        _ = try exec(nodes, scope: scope, out: &out)
        return out
    }

    private mutating func exec(_ nodes: [JinjaNode], scope: JinjaScope, out: inout String) throws -> Flow {
        for node in nodes {
            switch node {
            case let .text(s):
                out += s
            case let .output(e, line):
                out += try Self.str(eval(e, scope), line: line)
                if out.utf8.count > Self.maxOutputBytes {
                    throw JinjaError.runtime(line: line, message: "the rendered text exceeds \(Self.maxOutputBytes >> 20) MB")
                }
            case let .ifBlock(branches, otherwise):
                var taken = false
                for (cond, body) in branches where try eval(cond, scope).truthy {
                    taken = true
                    let f = try exec(body, scope: scope, out: &out)
                    if f != .normal { return f }
                    break
                }
                if !taken {
                    let f = try exec(otherwise, scope: scope, out: &out)
                    if f != .normal { return f }
                }
            case let .forLoop(targets, iterable, filter, body, otherwise, line):
                try execFor(targets: targets, iterable: iterable, filter: filter, body: body, otherwise: otherwise,
                            line: line, scope: scope, out: &out)
            case let .set(target, e, line):
                try assign(target, try eval(e, scope), scope: scope, line: line)
            case let .setBlock(target, body, filters, line):
                var v = JinjaValue.string(try renderChild(body, scope: scope))
                for (name, args, kwargs) in filters {
                    v = try applyFilter(name, v, args: args.map { try eval($0, scope) }, kwargs: try evalKwargs(kwargs, scope), line: line, scope: scope)
                }
                try assign(target, v, scope: scope, line: line)
            case let .macro(name, params, body, line):
                scope.set(name, .callable(makeMacro(name: name, params: params, body: body, defining: scope, line: line)))
            case let .filterBlock(name, args, kwargs, body, line):
                let text = JinjaValue.string(try renderChild(body, scope: scope))
                out += try Self.str(applyFilter(name, text, args: args.map { try eval($0, scope) }, kwargs: try evalKwargs(kwargs, scope), line: line, scope: scope), line: line)
            case .breakLoop:
                return .breakLoop
            case .continueLoop:
                return .continueLoop
            }
        }
        return .normal
    }

    private mutating func renderChild(_ body: [JinjaNode], scope: JinjaScope) throws -> String {
        var s = ""
        _ = try exec(body, scope: scope, out: &s)
        return s
    }

    private func assign(_ target: JinjaSetTarget, _ value: JinjaValue, scope: JinjaScope, line: Int) throws {
        switch target {
        case let .names(names):
            if names.count == 1 { scope.set(names[0], value); return }
            let items = try Self.iterate(value, line: line)
            guard items.count == names.count else {
                throw JinjaError.runtime(line: line, message: "cannot unpack \(items.count) values into \(names.count) names")
            }
            for (n, v) in zip(names, items) { scope.set(n, v) }
        case let .attribute(ns, attr):
            guard case let .namespace(obj)? = scope.lookup(ns) else {
                throw JinjaError.runtime(line: line, message: "cannot assign attribute on non-namespace object '\(ns)'")
            }
            obj.attributes[attr] = value
        }
    }

    private mutating func execFor(targets: [String], iterable: JinjaExpr, filter: JinjaExpr?, body: [JinjaNode], otherwise: [JinjaNode],
                                  line: Int, scope: JinjaScope, out: inout String) throws {
        let all = try Self.iterate(try eval(iterable, scope), line: line)
        let loopScope = JinjaScope(parent: scope)
        func bind(_ item: JinjaValue) throws {
            if targets.count == 1 { loopScope.set(targets[0], item); return }
            let parts = try Self.iterate(item, line: line)
            guard parts.count == targets.count else {
                throw JinjaError.runtime(line: line, message: "cannot unpack \(parts.count) values into \(targets.count) loop variables")
            }
            for (n, v) in zip(targets, parts) { loopScope.set(n, v) }
        }
        var items = all
        if let filter {
            items = []
            for item in all {
                try bind(item)
                if try eval(filter, loopScope).truthy { items.append(item) }
            }
        }
        if items.isEmpty {
            _ = try exec(otherwise, scope: scope, out: &out)
            return
        }
        let n = items.count
        for (k, item) in items.enumerated() {
            try state.step(line)
            try bind(item)
            var loop = JinjaObject()
            loop["index"] = .int(k + 1)
            loop["index0"] = .int(k)
            loop["revindex"] = .int(n - k)
            loop["revindex0"] = .int(n - k - 1)
            loop["first"] = .bool(k == 0)
            loop["last"] = .bool(k == n - 1)
            loop["length"] = .int(n)
            loop["depth"] = .int(1)
            loop["depth0"] = .int(0)
            loop["previtem"] = k > 0 ? items[k - 1] : .undefined("there is no previous item")
            loop["nextitem"] = k + 1 < n ? items[k + 1] : .undefined("there is no next item")
            loop["cycle"] = .callable(JinjaCallable("cycle") { args, _, l in
                guard !args.isEmpty else { throw JinjaError.runtime(line: l, message: "no items for cycling given") }
                return args[k % args.count]
            })
            loopScope.set("loop", .object(loop))
            let f = try exec(body, scope: loopScope, out: &out)
            if f == .breakLoop { break }
        }
    }

    private func makeMacro(name: String, params: [(String, JinjaExpr?)], body: [JinjaNode], defining: JinjaScope, line: Int) -> JinjaCallable {
        // the defining scope holds the macro: capture it weakly (it outlives every call of a render)
        JinjaCallable(name) { [weak defining, state] args, kwargs, callLine in
            guard let defining else { throw JinjaError.runtime(line: callLine, message: "macro '\(name)' called after its template finished") }
            guard args.count <= params.count else {
                throw JinjaError.runtime(line: callLine, message: "macro '\(name)' takes not more than \(params.count) argument(s)")
            }
            let scope = JinjaScope(parent: defining)
            var evaluator = JinjaEvaluator(state: state)
            for (k, (p, def)) in params.enumerated() {
                if k < args.count {
                    scope.set(p, args[k])
                } else if let kw = kwargs.first(where: { $0.0 == p }) {
                    scope.set(p, kw.1)
                } else if let def {
                    scope.set(p, try evaluator.eval(def, scope))
                } else {
                    scope.set(p, .undefined("'\(p)' is undefined"))
                }
            }
            for (k, _) in kwargs where !params.contains(where: { $0.0 == k }) {
                throw JinjaError.runtime(line: callLine, message: "macro '\(name)' takes no keyword argument '\(k)'")
            }
            return .string(try evaluator.render(body, scope: scope))
        }
    }

    // MARK: expressions

    private mutating func evalKwargs(_ kwargs: [(String, JinjaExpr)], _ scope: JinjaScope) throws -> [(String, JinjaValue)] {
        try kwargs.map { ($0.0, try eval($0.1, scope)) }
    }

    mutating func eval(_ expr: JinjaExpr, _ scope: JinjaScope) throws -> JinjaValue {
        switch expr {
        case let .literal(v):
            return v
        case let .name(n, _):
            if let v = scope.lookup(n) { return v }
            return .undefined("'\(n)' is undefined")
        case let .list(items):
            return .array(try items.map { try eval($0, scope) })
        case let .dict(pairs, line):
            var o = JinjaObject()
            for (k, v) in pairs {
                guard case let .string(key) = try eval(k, scope) else {
                    throw JinjaError.runtime(line: line, message: "dictionary keys must be strings in this Jinja subset")
                }
                o[key] = try eval(v, scope)
            }
            return .object(o)
        case let .getattr(base, name, line):
            return try Self.attribute(try eval(base, scope), name, line: line)
        case let .getitem(base, key, line):
            return try Self.item(try eval(base, scope), try eval(key, scope), line: line)
        case let .slice(base, start, stop, step, line):
            let v = try eval(base, scope)
            return try Self.slice(v, start.map { try eval($0, scope) }, stop.map { try eval($0, scope) }, step.map { try eval($0, scope) }, line: line)
        case let .call(callee, args, kwargs, line):
            let f = try eval(callee, scope)
            let a = try args.map { try eval($0, scope) }
            let kw = try evalKwargs(kwargs, scope)
            guard case let .callable(c) = f else {
                if case let .undefined(why) = f { throw JinjaError.runtime(line: line, message: why) }
                throw JinjaError.runtime(line: line, message: "'\(f.typeName)' object is not callable")
            }
            try state.step(line)
            state.depth += 1
            defer { state.depth -= 1 }
            guard state.depth <= Self.maxDepth else { throw JinjaError.runtime(line: line, message: "maximum call depth exceeded (\(Self.maxDepth))") }
            return try c.body(a, kw, line)
        case let .filter(base, name, args, kwargs, line):
            let v = try eval(base, scope)
            return try applyFilter(name, v, args: try args.map { try eval($0, scope) }, kwargs: try evalKwargs(kwargs, scope), line: line, scope: scope)
        case let .test(base, name, args, negated, line):
            let v = try eval(base, scope)
            let r = try JinjaBuiltins.test(name, v, args: try args.map { try eval($0, scope) }, line: line)
            return .bool(r != negated)
        case let .unary(op, e, line):
            let v = try eval(e, scope)
            switch op {
            case "not": return .bool(!v.truthy)
            case "-":
                switch v {
                case let .int(i): return .int(0 &- i)
                case let .double(d): return .double(-d)
                case let .bool(b): return .int(b ? -1 : 0)
                default: throw Self.typeError(line, "bad operand type for unary -: '\(v.typeName)'", v)
                }
            default:
                guard v.numeric != nil else { throw Self.typeError(line, "bad operand type for unary +: '\(v.typeName)'", v) }
                if case let .bool(b) = v { return .int(b ? 1 : 0) }
                return v
            }
        case let .binary(op, l, r, line):
            if op == "and" {
                let a = try eval(l, scope)
                return a.truthy ? try eval(r, scope) : a
            }
            if op == "or" {
                let a = try eval(l, scope)
                return a.truthy ? a : try eval(r, scope)
            }
            return try Self.arithmetic(op, try eval(l, scope), try eval(r, scope), line: line)
        case let .compare(first, ops, line):
            var left = try eval(first, scope)
            for (op, e) in ops {
                let right = try eval(e, scope)
                guard try Self.compare(op, left, right, line: line) else { return .bool(false) }
                left = right
            }
            return .bool(true)
        case let .conditional(then, condition, otherwise, _):
            if try eval(condition, scope).truthy { return try eval(then, scope) }
            return try otherwise.map { try eval($0, scope) } ?? .undefined("the inline if-expression evaluated to false and no else section was defined")
        }
    }

    private mutating func applyFilter(_ name: String, _ v: JinjaValue, args: [JinjaValue], kwargs: [(String, JinjaValue)], line: Int, scope: JinjaScope) throws -> JinjaValue {
        try JinjaBuiltins.filter(name, v, args: args, kwargs: kwargs, line: line)
    }

    // MARK: value helpers

    static func typeError(_ line: Int, _ message: String, _ operands: JinjaValue...) -> JinjaError {
        for o in operands { if case let .undefined(why) = o { return .runtime(line: line, message: why) } }
        return .runtime(line: line, message: message)
    }

    /// The items a `for` loop visits: list elements, dict keys, string characters.
    static func iterate(_ v: JinjaValue, line: Int) throws -> [JinjaValue] {
        switch v {
        case .undefined: return []
        case let .array(a): return a
        case let .object(o): return o.keys.map { .string($0) }
        case let .string(s): return s.unicodeScalars.map { .string(String($0)) }
        case let .namespace(n): return n.attributes.keys.map { .string($0) }
        default: throw JinjaError.runtime(line: line, message: "'\(v.typeName)' object is not iterable")
        }
    }

    /// `{{ v }}`: Python's `str(v)`; undefined prints nothing.
    static func str(_ v: JinjaValue, line: Int) throws -> String {
        switch v {
        case .undefined: return ""
        case let .string(s): return s
        default: return JinjaJSON.pythonStr(v)
        }
    }

    static func attribute(_ v: JinjaValue, _ name: String, line: Int) throws -> JinjaValue {
        switch v {
        case let .undefined(why):
            throw JinjaError.runtime(line: line, message: why)
        case let .object(o):
            if let m = JinjaBuiltins.method(v, name, line: line) { return m }
            return o[name] ?? .undefined("'dict object' has no attribute '\(name)'")
        case let .namespace(n):
            return n.attributes[name] ?? .undefined("'Namespace' object has no attribute '\(name)'")
        default:
            if let m = JinjaBuiltins.method(v, name, line: line) { return m }
            return .undefined("'\(v.typeName) object' has no attribute '\(name)'")
        }
    }

    static func item(_ v: JinjaValue, _ key: JinjaValue, line: Int) throws -> JinjaValue {
        switch (v, key) {
        case let (.undefined(why), _):
            throw JinjaError.runtime(line: line, message: why)
        case let (.object(o), .string(k)):
            if let x = o[k] { return x }
            return JinjaBuiltins.method(v, k, line: line) ?? .undefined("'dict object' has no attribute '\(k)'")
        case let (.namespace(n), .string(k)):
            return n.attributes[k] ?? .undefined("'Namespace' object has no attribute '\(k)'")
        case let (.array(a), _):
            guard let i = key.intIndex else { return .undefined("list indices must be integers") }
            let j = i < 0 ? a.count + i : i
            return j >= 0 && j < a.count ? a[j] : .undefined("list object has no element \(i)")
        case let (.string(s), _):
            guard let i = key.intIndex else { return .undefined("string indices must be integers") }
            let u = Array(s.unicodeScalars)
            let j = i < 0 ? u.count + i : i
            return j >= 0 && j < u.count ? .string(String(u[j])) : .undefined("str object has no element \(i)")
        case let (_, .string(k)):
            return try attribute(v, k, line: line)
        default:
            return .undefined("'\(v.typeName) object' has no attribute '\(JinjaJSON.pythonStr(key))'")
        }
    }

    /// Python slicing `v[start:stop:step]` of a list or string.
    static func slice(_ v: JinjaValue, _ start: JinjaValue?, _ stop: JinjaValue?, _ step: JinjaValue?, line: Int) throws -> JinjaValue {
        func idx(_ x: JinjaValue?) throws -> Int? {
            guard let x, !x.isNone else { return nil }
            guard let i = x.intIndex else { throw JinjaError.runtime(line: line, message: "slice indices must be integers or None") }
            return i
        }
        let st = try idx(step) ?? 1
        guard st != 0 else { throw JinjaError.runtime(line: line, message: "slice step cannot be zero") }
        func indices(_ n: Int) throws -> [Int] {
            var a = try idx(start), b = try idx(stop)
            if st > 0 {
                var lo = a ?? 0, hi = b ?? n
                if lo < 0 { lo = max(0, lo + n) }
                if hi < 0 { hi = max(0, hi + n) }
                lo = min(lo, n); hi = min(hi, n)
                return lo < hi ? Array(stride(from: lo, to: hi, by: st)) : []
            }
            if let x = a, x < 0 { a = x + n }
            if let x = b, x < 0 { b = x + n }
            let lo = min(a ?? (n - 1), n - 1)
            let hi = b.map { max($0, -1) } ?? -1
            return lo > hi ? Array(stride(from: lo, to: hi, by: st)) : []
        }
        switch v {
        case let .array(a): return .array(try indices(a.count).map { a[$0] })
        case let .string(s):
            let u = Array(s.unicodeScalars)
            var out = String.UnicodeScalarView()
            for i in try indices(u.count) { out.append(u[i]) }
            return .string(String(out))
        case let .undefined(why): throw JinjaError.runtime(line: line, message: why)
        default: throw JinjaError.runtime(line: line, message: "'\(v.typeName)' object is not subscriptable")
        }
    }

    static func arithmetic(_ op: String, _ a: JinjaValue, _ b: JinjaValue, line: Int) throws -> JinjaValue {
        func checked(_ x: String, _ y: String) throws -> JinjaValue {
            guard x.utf8.count + y.utf8.count <= maxOutputBytes else {
                throw JinjaError.runtime(line: line, message: "string longer than \(maxOutputBytes >> 20) MB")
            }
            return .string(x + y)
        }
        if op == "~" { return try checked(try str(a, line: line), try str(b, line: line)) }
        switch (op, a, b) {
        case let ("+", .string(x), .string(y)): return try checked(x, y)
        case let ("+", .array(x), .array(y)):
            guard x.count + y.count <= 1_000_000 else { throw JinjaError.runtime(line: line, message: "list longer than 1000000 items") }
            return .array(x + y)
        case let ("%", .string(x), _): return .string(try JinjaBuiltins.percentFormat(x, b, line: line))
        case let ("*", .string(x), .int(n)), let ("*", .int(n), .string(x)):
            guard n <= 0 || x.utf8.count <= maxOutputBytes / n else { throw JinjaError.runtime(line: line, message: "string repetition larger than \(maxOutputBytes >> 20) MB") }
            return .string(String(repeating: x, count: max(0, n)))
        case let ("*", .array(x), .int(n)), let ("*", .int(n), .array(x)):
            guard n <= 0 || x.count <= 1_000_000 / n else { throw JinjaError.runtime(line: line, message: "list repetition longer than 1000000 items") }
            return .array(Array([[JinjaValue]](repeating: x, count: max(0, n)).joined()))
        default: break
        }
        func intOf(_ v: JinjaValue) -> Int? {
            switch v {
            case let .int(i): return i
            case let .bool(b): return b ? 1 : 0
            default: return nil
            }
        }
        guard let x = a.numeric, let y = b.numeric else {
            if op == "+", case .string = a {
                throw typeError(line, "can only concatenate str (not \"\(b.typeName)\") to str", a, b)
            }
            throw typeError(line, "unsupported operand type(s) for \(op): '\(a.typeName)' and '\(b.typeName)'", a, b)
        }
        if let i = intOf(a), let j = intOf(b) {
            switch op {
            case "+": return .int(i &+ j)
            case "-": return .int(i &- j)
            case "*": return .int(i &* j)
            case "/":
                guard j != 0 else { throw JinjaError.runtime(line: line, message: "division by zero") }
                return .double(Double(i) / Double(j))
            case "//":
                guard j != 0 else { throw JinjaError.runtime(line: line, message: "integer division or modulo by zero") }
                let q = i / j
                return .int((i % j != 0 && (i < 0) != (j < 0)) ? q - 1 : q)
            case "%":
                guard j != 0 else { throw JinjaError.runtime(line: line, message: "integer division or modulo by zero") }
                let r = i % j
                return .int(r != 0 && (r < 0) != (j < 0) ? r + j : r)
            case "**":
                if j >= 0 {
                    var r = 1
                    for _ in 0..<min(j, 64) { r = r &* i }
                    return .int(r)
                }
                return .double(pow(Double(i), Double(j)))
            default: break
            }
        }
        switch op {
        case "+": return .double(x + y)
        case "-": return .double(x - y)
        case "*": return .double(x * y)
        case "/":
            guard y != 0 else { throw JinjaError.runtime(line: line, message: "float division by zero") }
            return .double(x / y)
        case "//":
            guard y != 0 else { throw JinjaError.runtime(line: line, message: "float floor division by zero") }
            return .double((x / y).rounded(.down))
        case "%":
            guard y != 0 else { throw JinjaError.runtime(line: line, message: "float modulo") }
            let r = fmod(x, y)
            return .double(r != 0 && (r < 0) != (y < 0) ? r + y : r)
        case "**": return .double(pow(x, y))
        default: throw JinjaError.runtime(line: line, message: "unknown operator \(op)")
        }
    }

    static func compare(_ op: String, _ a: JinjaValue, _ b: JinjaValue, line: Int) throws -> Bool {
        switch op {
        case "==": return a.pyEquals(b)
        case "!=": return !a.pyEquals(b)
        case "<": return try a.pyLess(b, line: line)
        case ">": return try b.pyLess(a, line: line)
        case "<=": return try !b.pyLess(a, line: line)
        case ">=": return try !a.pyLess(b, line: line)
        case "in": return try contains(b, a, line: line)
        case "notin": return try !contains(b, a, line: line)
        default: throw JinjaError.runtime(line: line, message: "unknown comparison \(op)")
        }
    }

    /// Python `x in container`.
    static func contains(_ container: JinjaValue, _ x: JinjaValue, line: Int) throws -> Bool {
        switch container {
        case let .string(s):
            guard case let .string(sub) = x else {
                throw typeError(line, "'in <string>' requires string as left operand, not \(x.typeName)", x)
            }
            return JinjaBuiltins.find(s, sub) != nil
        case let .array(a): return a.contains { $0.pyEquals(x) }
        case let .object(o):
            guard case let .string(k) = x else { return false }
            return o[k] != nil
        case let .namespace(n):
            guard case let .string(k) = x else { return false }
            return n.attributes[k] != nil
        case .undefined: return false
        default: throw JinjaError.runtime(line: line, message: "argument of type '\(container.typeName)' is not iterable")
        }
    }
}

extension JinjaValue {
    /// An int (or bool) usable as an index.
    var intIndex: Int? {
        switch self {
        case let .int(i): return i
        case let .bool(b): return b ? 1 : 0
        default: return nil
        }
    }
}
