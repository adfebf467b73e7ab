import Foundation
import JSON

/// The filters, tests, methods and global functions of the Jinja subset, with the semantics of
/// Jinja2 3.1 (filters, tests) and Python 3 (`str` / `dict` methods).
enum JinjaBuiltins {
    // MARK: string helpers (Unicode scalars, as Python's str)

    static func scalars(_ s: String) -> [Unicode.Scalar] { Array(s.unicodeScalars) }

    static func string(_ u: some Sequence<Unicode.Scalar>) -> String {
        var v = String.UnicodeScalarView()
        v.append(contentsOf: u)
        return String(v)
    }

    /// Index (in scalars) of the first occurrence of `sub` in `s`.
    static func find(_ s: String, _ sub: String, from start: Int = 0) -> Int? {
        let a = scalars(s), b = scalars(sub)
        if b.isEmpty { return min(start, a.count) }
        guard a.count >= b.count, start <= a.count - b.count else { return nil }
        for i in start...(a.count - b.count) where a[i] == b[0] && a[i..<(i + b.count)].elementsEqual(b) { return i }
        return nil
    }

    /// Python's `str.split(sep, maxsplit)` for a non-empty `sep`, comparing Unicode scalars.
    static func split(_ s: String, _ sep: String, maxSplit: Int = -1) -> [String] {
        s.splitScalars(sep, maxSplits: maxSplit)
    }

    /// Python's `str.split()` without a separator: runs of whitespace, no empty strings.
    static func splitWhitespace(_ s: String, maxSplit: Int = -1) -> [String] {
        var out: [String] = [], cur: [Unicode.Scalar] = []
        var rest = s.unicodeScalars[...]
        while let u = rest.first {
            if JinjaLexer.isSpace(u) {
                if !cur.isEmpty {
                    out.append(string(cur)); cur = []
                    if maxSplit >= 0 && out.count == maxSplit {
                        let tail = rest.drop(while: JinjaLexer.isSpace)
                        if !tail.isEmpty { out.append(string(tail)) }
                        return out
                    }
                }
            } else {
                cur.append(u)
            }
            rest = rest.dropFirst()
        }
        if !cur.isEmpty { out.append(string(cur)) }
        return out
    }

    static func strip(_ s: String, _ chars: String?, leading: Bool, trailing: Bool) -> String {
        let set = chars.map { Set($0.unicodeScalars) }
        func drop(_ u: Unicode.Scalar) -> Bool { set.map { $0.contains(u) } ?? JinjaLexer.isSpace(u) }
        var a = s.unicodeScalars[...]
        if leading { a = a.drop(while: drop) }
        if trailing { while let l = a.last, drop(l) { a = a.dropLast() } }
        return string(a)
    }

    static func title(_ s: String) -> String {
        var out = "", prevCased = false
        for u in s.unicodeScalars {
            let ch = String(u)
            if u.properties.isAlphabetic {
                out += prevCased ? ch.lowercased() : ch.uppercased()
                prevCased = true
            } else {
                out += ch
                prevCased = false
            }
        }
        return out
    }

    static func capitalize(_ s: String) -> String {
        guard let f = s.unicodeScalars.first else { return s }
        return String(f).uppercased() + string(s.unicodeScalars.dropFirst()).lowercased()
    }

    // MARK: argument helpers

    private static func arg(_ args: [JinjaValue], _ kwargs: [(String, JinjaValue)], _ i: Int, _ name: String) -> JinjaValue? {
        if i < args.count { return args[i] }
        return kwargs.first { $0.0 == name }?.1
    }

    private static func stringArg(_ v: JinjaValue?, _ what: String, line: Int) throws -> String? {
        guard let v, !v.isNone else { return nil }
        guard case let .string(s) = v else { throw JinjaError.runtime(line: line, message: "\(what) must be a string, not \(v.typeName)") }
        return s
    }

    private static func text(_ v: JinjaValue, line: Int) throws -> String {
        if case let .undefined(why) = v { _ = why; return "" }
        return try JinjaEvaluator.str(v, line: line)
    }

    /// The string a string filter works on: Jinja2's `soft_str` (undefined is "").
    private static func requireString(_ v: JinjaValue, _ filter: String, line: Int) throws -> String {
        switch v {
        case let .string(s): return s
        case .undefined: return ""
        default: return JinjaJSON.pythonStr(v)
        }
    }

    /// An attribute path `a.b.0` of a value (the `attribute=` of sort, map, selectattr…).
    private static func attributePath(_ v: JinjaValue, _ path: String, line: Int) throws -> JinjaValue {
        var cur = v
        for part in path.split(separator: ".") {
            if let i = Int(part) { cur = try JinjaEvaluator.item(cur, .int(i), line: line) } else {
                if case .undefined = cur { return cur }
                cur = try JinjaEvaluator.item(cur, .string(String(part)), line: line)
            }
        }
        return cur
    }

    // MARK: filters

    static func filter(_ name: String, _ v: JinjaValue, args: [JinjaValue], kwargs: [(String, JinjaValue)], line: Int) throws -> JinjaValue {
        for family in [stringFilter, numberFilter, sequenceFilter, valueFilter] {
            if let r = try family(name, v, args, kwargs, line) { return r }
        }
        throw JinjaError.runtime(line: line, message: "no filter named '\(name)'")
    }

    /// String filters (`trim`, `upper`, `replace`, `indent`, `format`, `escape`, …); nil: not one of them.
    static func stringFilter(_ name: String, _ v: JinjaValue, _ args: [JinjaValue], _ kwargs: [(String, JinjaValue)], _ line: Int) throws -> JinjaValue? {
        switch name {
        case "trim":
            let chars = try stringArg(arg(args, kwargs, 0, "chars"), "trim's chars", line: line)
            return .string(strip(try requireString(v, name, line: line), chars, leading: true, trailing: true))
        case "upper": return .string(try requireString(v, name, line: line).uppercased())
        case "lower": return .string(try requireString(v, name, line: line).lowercased())
        case "title": return .string(title(try requireString(v, name, line: line)))
        case "capitalize": return .string(capitalize(try requireString(v, name, line: line)))
        case "string": return .string(try text(v, line: line))
        case "safe", "e", "escape", "forceescape":
            if name == "safe" { return v }
            return .string(htmlEscaper.escape(try text(v, line: line)))
        case "replace":
            let s = try requireString(v, name, line: line)
            guard let old = try stringArg(arg(args, kwargs, 0, "old"), "replace's old", line: line),
                  let new = try stringArg(arg(args, kwargs, 1, "new"), "replace's new", line: line) else {
                throw JinjaError.runtime(line: line, message: "replace needs two strings")
            }
            let count = arg(args, kwargs, 2, "count")?.intIndex ?? -1
            return .string(replace(s, old, new, count: count))
        case "indent":
            let s = try requireString(v, name, line: line)
            var width = "    "
            if let w = arg(args, kwargs, 0, "width") {
                if case let .string(t) = w { width = t } else if let n = w.intIndex { width = String(repeating: " ", count: n) }
            }
            let first = arg(args, kwargs, 1, "first")?.truthy ?? false
            let blank = arg(args, kwargs, 2, "blank")?.truthy ?? false
            var lines = split(s, "\n")
            for k in lines.indices where k > 0 || first {
                if blank || !lines[k].isEmpty { lines[k] = width + lines[k] }
            }
            return .string(lines.joined(separator: "\n"))
        case "wordcount":
            return .int(splitWhitespace(try requireString(v, name, line: line)).count)
        case "center":
            let s = try requireString(v, name, line: line)
            let width = arg(args, kwargs, 0, "width")?.intIndex ?? 80
            let n = s.unicodeScalars.count
            guard width > n else { return .string(s) }
            let total = width - n, left = total / 2 + (total & width & 1)
            return .string(String(repeating: " ", count: left) + s + String(repeating: " ", count: total - left))
        case "format":
            // Jinja2's format filter: Python's `value % args`
            let fmt = try requireString(v, name, line: line)
            if !kwargs.isEmpty { return .string(try percentFormat(fmt, .object(JinjaObject(kwargs)), line: line)) }
            return .string(try percentFormat(fmt, .array(args), line: line))
        default:
            return nil
        }
    }

    /// Number filters (`int`, `float`, `abs`, `round`, `sum`, `min`/`max`); nil: not one of them.
    static func numberFilter(_ name: String, _ v: JinjaValue, _ args: [JinjaValue], _ kwargs: [(String, JinjaValue)], _ line: Int) throws -> JinjaValue? {
        switch name {
        case "int":
            let def = arg(args, kwargs, 0, "default") ?? .int(0)
            switch v {
            case let .int(i): return .int(i)
            case let .bool(b): return .int(b ? 1 : 0)
            case let .double(d): return d.isFinite ? .int(Int(d)) : def
            case let .string(s):
                let t = strip(s, nil, leading: true, trailing: true)
                if let i = Int(t) { return .int(i) }
                if let d = Double(t), d.isFinite { return .int(Int(d)) }
                return def
            default: return def
            }
        case "float":
            let def = arg(args, kwargs, 0, "default") ?? .double(0)
            switch v {
            case let .int(i): return .double(Double(i))
            case let .double(d): return .double(d)
            case let .bool(b): return .double(b ? 1 : 0)
            case let .string(s): return Double(strip(s, nil, leading: true, trailing: true)).map { .double($0) } ?? def
            default: return def
            }
        case "abs":
            switch v {
            case let .int(i): return .int(abs(i))
            case let .double(d): return .double(abs(d))
            default: throw JinjaError.runtime(line: line, message: "bad operand type for abs(): '\(v.typeName)'")
            }
        case "round":
            let precision = arg(args, kwargs, 0, "precision")?.intIndex ?? 0
            let method = try stringArg(arg(args, kwargs, 1, "method"), "round's method", line: line) ?? "common"
            guard let x = v.numeric else { throw JinjaError.runtime(line: line, message: "round needs a number") }
            let m = pow(10.0, Double(precision))
            let r: Double
            switch method {
            case "ceil": r = (x * m).rounded(.up) / m
            case "floor": r = (x * m).rounded(.down) / m
            default: r = (x * m).rounded(.toNearestOrAwayFromZero) / m
            }
            return .double(r)
        case "sum":
            var items = try JinjaEvaluator.iterate(v, line: line)
            if let a = try stringArg(arg(args, kwargs, 0, "attribute"), "sum's attribute", line: line) {
                items = try items.map { try attributePath($0, a, line: line) }
            }
            var acc = arg(args, kwargs, 1, "start") ?? .int(0)
            for x in items { acc = try JinjaEvaluator.arithmetic("+", acc, x, line: line) }
            return acc
        case "min", "max":
            let items = try JinjaEvaluator.iterate(v, line: line)
            guard var best = items.first else { return .undefined("No aggregated item, sequence was empty.") }
            for x in items.dropFirst() {
                let less = try x.pyLess(best, line: line)
                if (name == "min") == less && !x.pyEquals(best) { best = x }
            }
            return best
        default:
            return nil
        }
    }

    /// Sequence filters (`length`, `join`, `items`, `first`, `sort`, `dictsort`, `batch`, …); nil: not one of them.
    static func sequenceFilter(_ name: String, _ v: JinjaValue, _ args: [JinjaValue], _ kwargs: [(String, JinjaValue)], _ line: Int) throws -> JinjaValue? {
        switch name {
        case "length", "count":
            switch v {
            case let .string(s): return .int(s.unicodeScalars.count)
            case let .array(a): return .int(a.count)
            case let .object(o): return .int(o.entries.count)
            case .undefined: return .int(0)
            default: throw JinjaError.runtime(line: line, message: "object of type '\(v.typeName)' has no len()")
            }
        case "join":
            let sep = try stringArg(arg(args, kwargs, 0, "d"), "join's separator", line: line) ?? ""
            var items = try JinjaEvaluator.iterate(v, line: line)
            if let a = try stringArg(arg(args, kwargs, 1, "attribute"), "join's attribute", line: line) {
                items = try items.map { try attributePath($0, a, line: line) }
            }
            return .string(try items.map { try text($0, line: line) }.joined(separator: sep))
        case "items":
            switch v {
            case let .object(o): return .array(o.entries.map { .array([.string($0.0), $0.1]) })
            case .undefined: return .array([])
            default: throw JinjaError.runtime(line: line, message: "can only get item pairs from a mapping, not \(v.typeName)")
            }
        case "list": return .array(try JinjaEvaluator.iterate(v, line: line))
        case "first":
            return try JinjaEvaluator.iterate(v, line: line).first ?? .undefined("No first item, sequence was empty.")
        case "last":
            return try JinjaEvaluator.iterate(v, line: line).last ?? .undefined("No last item, sequence was empty.")
        case "reverse":
            if case let .string(s) = v { return .string(string(s.unicodeScalars.reversed())) }
            return .array(try JinjaEvaluator.iterate(v, line: line).reversed())
        case "unique":
            var out: [JinjaValue] = []
            for x in try JinjaEvaluator.iterate(v, line: line) where !out.contains(where: { $0.pyEquals(x) }) { out.append(x) }
            return .array(out)
        case "sort":
            let reverse = arg(args, kwargs, 0, "reverse")?.truthy ?? false
            let attribute = try stringArg(arg(args, kwargs, 2, "attribute"), "sort's attribute", line: line)
            let items = try JinjaEvaluator.iterate(v, line: line)
            let keyed = try items.map { x in (x, try attribute.map { a in try attributePath(x, a, line: line) } ?? x) }
            var err: Error?
            let sorted = keyed.enumerated().sorted { l, r in
                do {
                    if try l.element.1.pyLess(r.element.1, line: line) { return !reverse }
                    if try r.element.1.pyLess(l.element.1, line: line) { return reverse }
                } catch { err = error }
                return l.offset < r.offset
            }
            if let err { throw err }
            return .array(sorted.map { $0.element.0 })
        case "dictsort":
            guard case let .object(o) = v else { throw JinjaError.runtime(line: line, message: "dictsort needs a mapping, not \(v.typeName)") }
            let caseSensitive = arg(args, kwargs, 0, "case_sensitive")?.truthy ?? false
            let byValue = (try stringArg(arg(args, kwargs, 1, "by"), "dictsort's by", line: line) ?? "key") == "value"
            let reverse = arg(args, kwargs, 2, "reverse")?.truthy ?? false
            func key(_ e: (String, JinjaValue)) -> JinjaValue {
                let k = byValue ? e.1 : .string(e.0)
                if !caseSensitive, case let .string(s) = k { return .string(s.lowercased()) }
                return k
            }
            var err: Error?
            let sorted = o.entries.enumerated().sorted { l, r in
                do {
                    if try key(l.element).pyLess(key(r.element), line: line) { return !reverse }
                    if try key(r.element).pyLess(key(l.element), line: line) { return reverse }
                } catch { err = error }
                return l.offset < r.offset
            }
            if let err { throw err }
            return .array(sorted.map { .array([.string($0.element.0), $0.element.1]) })
        case "batch":
            guard let n = args.first?.intIndex, n > 0 else { throw JinjaError.runtime(line: line, message: "batch needs a positive size") }
            let items = try JinjaEvaluator.iterate(v, line: line)
            return .array(stride(from: 0, to: items.count, by: n).map { .array(Array(items[$0..<min($0 + n, items.count)])) })
        default:
            return nil
        }
    }

    /// Filters over any value (`default`, `tojson`, `map`, `select`/`reject`(`attr`), `attr`); nil: not one of them.
    static func valueFilter(_ name: String, _ v: JinjaValue, _ args: [JinjaValue], _ kwargs: [(String, JinjaValue)], _ line: Int) throws -> JinjaValue? {
        switch name {
        case "default", "d":
            let def = arg(args, kwargs, 0, "default_value") ?? .string("")
            let boolean = arg(args, kwargs, 1, "boolean")?.truthy ?? false
            if v.isUndefined || (boolean && !v.truthy) { return def }
            return v
        case "tojson":
            let ensureASCII = arg(args, kwargs, 99, "ensure_ascii")?.truthy ?? false
            var indent: String?
            if let i = arg(args, kwargs, 0, "indent"), !i.isNone {
                switch i {
                case let .int(n): indent = String(repeating: " ", count: max(0, n))
                case let .string(s): indent = s
                default: throw JinjaError.runtime(line: line, message: "tojson's indent must be an integer or a string")
                }
            }
            var separators: (String, String)?
            if let s = arg(args, kwargs, 99, "separators"), case let .array(p) = s, p.count == 2,
               case let .string(a) = p[0], case let .string(b) = p[1] { separators = (a, b) }
            let sortKeys = arg(args, kwargs, 99, "sort_keys")?.truthy ?? false
            return .string(try JinjaJSON.dumps(v, ensureASCII: ensureASCII, indent: indent, separators: separators, sortKeys: sortKeys, line: line))
        case "map":
            let items = try JinjaEvaluator.iterate(v, line: line)
            if let a = try stringArg(arg(args, kwargs, 99, "attribute"), "map's attribute", line: line) {
                let def = arg(args, kwargs, 99, "default")
                return .array(try items.map { x in
                    let r = try attributePath(x, a, line: line)
                    if r.isUndefined, let def { return def }
                    return r
                })
            }
            guard let f = try stringArg(args.first, "map's filter", line: line) else {
                throw JinjaError.runtime(line: line, message: "map needs a filter name or attribute=")
            }
            return .array(try items.map { try filter(f, $0, args: Array(args.dropFirst()), kwargs: kwargs, line: line) })
        case "select", "reject", "selectattr", "rejectattr":
            let items = try JinjaEvaluator.iterate(v, line: line)
            let byAttr = name.hasSuffix("attr")
            let keep = name.hasPrefix("select")
            var rest = args
            var attribute: String?
            if byAttr {
                guard let a = try stringArg(rest.first, "\(name)'s attribute", line: line) else {
                    throw JinjaError.runtime(line: line, message: "\(name) needs an attribute name")
                }
                attribute = a
                rest.removeFirst()
            }
            let testName = try stringArg(rest.first, "\(name)'s test", line: line)
            let testArgs = Array(rest.dropFirst())
            return .array(try items.filter { x in
                let subject = try attribute.map { try attributePath(x, $0, line: line) } ?? x
                let passes = try testName.map { try test($0, subject, args: testArgs, line: line) } ?? subject.truthy
                return passes == keep
            })
        case "attr":
            guard let a = try stringArg(args.first, "attr's name", line: line) else { throw JinjaError.runtime(line: line, message: "attr needs a name") }
            return try JinjaEvaluator.attribute(v, a, line: line)
        default:
            return nil
        }
    }

    static func replace(_ s: String, _ old: String, _ new: String, count: Int) -> String {
        if old.isEmpty {
            var out = new, k = 1
            for u in s.unicodeScalars {
                out.unicodeScalars.append(u)
                if count < 0 || k < count { out += new; k += 1 }
            }
            return count == 0 ? s : out
        }
        let parts = split(s, old, maxSplit: count)
        return parts.joined(separator: new)
    }

    // MARK: string formatting

    /// Python's `fmt % values` for `%s`, `%r`, `%d`, `%i`, `%f` (with precision), `%x`, `%%`
    /// and `%(name)s` with a mapping.
    static func percentFormat(_ fmt: String, _ values: JinjaValue, line: Int) throws -> String {
        var positional: [JinjaValue] = []
        var mapping: JinjaObject?
        switch values {
        case let .array(a): positional = a
        case let .object(o): mapping = o
        default: positional = [values]
        }
        var out = "", next = 0
        let u = Array(fmt.unicodeScalars)
        var i = 0
        func fail(_ m: String) -> JinjaError { .runtime(line: line, message: m) }
        while i < u.count {
            guard u[i] == "%" else { out.unicodeScalars.append(u[i]); i += 1; continue }
            i += 1
            guard i < u.count else { throw fail("incomplete format") }
            if u[i] == "%" { out += "%"; i += 1; continue }
            var value: JinjaValue
            if u[i] == "(" {
                guard let close = u[i...].firstIndex(of: ")"), let m = mapping else { throw fail("format requires a mapping") }
                let key = string(u[(i + 1)..<close])
                value = m[key] ?? .undefined("'\(key)' is undefined")
                if value.isUndefined { throw fail("KeyError: '\(key)'") }
                i = close + 1
            } else {
                guard next < positional.count else { throw fail("not enough arguments for format string") }
                value = positional[next]
                next += 1
            }
            var precision: Int?
            if i < u.count, u[i] == "." {
                var j = i + 1, n = 0
                while j < u.count, ("0"..."9").contains(u[j]) { n = n * 10 + Int(u[j].value - 48); j += 1 }
                precision = n
                i = j
            }
            guard i < u.count else { throw fail("incomplete format") }
            switch u[i] {
            case "s": out += try JinjaEvaluator.str(value, line: line)
            case "r": out += JinjaJSON.pythonReprValue(value)
            case "d", "i":
                guard let x = value.numeric else { throw fail("%d format: a real number is required, not \(value.typeName)") }
                out += String(Int(x.rounded(.towardZero)))
            case "f":
                guard let x = value.numeric else { throw fail("%f format: a real number is required, not \(value.typeName)") }
                out += String(format: "%.\(precision ?? 6)f", x)
            case "x":
                guard let x = value.intIndex else { throw fail("%x format: an integer is required") }
                out += String(x, radix: 16)
            default: throw fail("unsupported format character '\(Character(u[i]))'")
            }
            i += 1
        }
        if mapping == nil, next < positional.count, case .array = values {
            throw fail("not all arguments converted during string formatting")
        }
        return out
    }

    /// MarkupSafe's escape, as Jinja2's `escape` filter.
    static let htmlEscaper = ScalarEscaper(["&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&#34;", "'": "&#39;"])

    /// Python's `str.format` for `{}`, `{0}`, `{name}` and `{{` / `}}` (no format specs).
    static func braceFormat(_ fmt: String, _ args: [JinjaValue], _ kwargs: [(String, JinjaValue)], line: Int) throws -> String {
        var out = "", auto = 0
        let u = Array(fmt.unicodeScalars)
        var i = 0
        while i < u.count {
            let c = u[i]
            if c == "{", i + 1 < u.count, u[i + 1] == "{" { out += "{"; i += 2; continue }
            if c == "}", i + 1 < u.count, u[i + 1] == "}" { out += "}"; i += 2; continue }
            guard c == "{" else { out.unicodeScalars.append(c); i += 1; continue }
            guard let close = u[i...].firstIndex(of: "}") else { throw JinjaError.runtime(line: line, message: "Single '{' encountered in format string") }
            let field = string(u[(i + 1)..<close])
            let v: JinjaValue
            if field.isEmpty {
                guard auto < args.count else { throw JinjaError.runtime(line: line, message: "Replacement index \(auto) out of range for positional args tuple") }
                v = args[auto]; auto += 1
            } else if let k = Int(field) {
                guard k < args.count else { throw JinjaError.runtime(line: line, message: "Replacement index \(k) out of range for positional args tuple") }
                v = args[k]
            } else {
                guard let x = kwargs.first(where: { $0.0 == field })?.1 else { throw JinjaError.runtime(line: line, message: "KeyError: '\(field)'") }
                v = x
            }
            out += try JinjaEvaluator.str(v, line: line)
            i = close + 1
        }
        return out
    }

    // MARK: tests

    static func test(_ name: String, _ v: JinjaValue, args: [JinjaValue], line: Int) throws -> Bool {
        func other() throws -> JinjaValue {
            guard let a = args.first else { throw JinjaError.runtime(line: line, message: "test '\(name)' needs an argument") }
            return a
        }
        switch name {
        case "defined": return !v.isUndefined
        case "undefined": return v.isUndefined
        case "none": return v.isNone
        case "boolean": if case .bool = v { return true } else { return false }
        case "true": if case .bool(true) = v { return true } else { return false }
        case "false": if case .bool(false) = v { return true } else { return false }
        case "string": if case .string = v { return true } else { return false }
        case "number":
            switch v { case .int, .double, .bool: return true; default: return false }
        case "integer": if case .int = v { return true } else { return false }
        case "float": if case .double = v { return true } else { return false }
        case "mapping": if case .object = v { return true } else { return false }
        case "sequence", "iterable":
            switch v {
            case .string, .array, .object: return true
            case .namespace: return name == "iterable"
            default: return false
            }
        case "callable": if case .callable = v { return true } else { return false }
        case "lower": if case let .string(s) = v { return s.lowercased() == s } else { return false }
        case "upper": if case let .string(s) = v { return s.uppercased() == s } else { return false }
        case "odd", "even":
            guard let i = v.intIndex else { throw JinjaError.runtime(line: line, message: "test '\(name)' needs an integer") }
            return (i % 2 != 0) == (name == "odd")
        case "divisibleby":
            guard let i = v.intIndex, let n = try other().intIndex, n != 0 else {
                throw JinjaError.runtime(line: line, message: "divisibleby needs integers")
            }
            return i % n == 0
        case "eq", "equalto", "==": return v.pyEquals(try other())
        case "ne", "!=": return !v.pyEquals(try other())
        case "lt", "lessthan", "<": return try v.pyLess(other(), line: line)
        case "gt", "greaterthan", ">": return try other().pyLess(v, line: line)
        case "le", "<=": return try !other().pyLess(v, line: line)
        case "ge", ">=": return try !v.pyLess(other(), line: line)
        case "in": return try JinjaEvaluator.contains(other(), v, line: line)
        case "sameas":
            let o = try other()
            switch (v, o) {
            case (.none, .none): return true
            case let (.bool(a), .bool(b)): return a == b
            case let (.namespace(a), .namespace(b)): return a === b
            case let (.callable(a), .callable(b)): return a === b
            default: return false
            }
        case "escaped": return false
        default:
            throw JinjaError.runtime(line: line, message: "no test named '\(name)'")
        }
    }

    // MARK: methods

    /// `str`, `dict` and `list` methods as bound callables; nil when `v` has no such method.
    static func method(_ v: JinjaValue, _ name: String, line: Int) -> JinjaValue? {
        func bound(_ body: @escaping ([JinjaValue], [(String, JinjaValue)], Int) throws -> JinjaValue) -> JinjaValue { Self.bound(name, body) }
        switch v {
        case let .string(s):
            return stringMethod(s, name)
        case let .object(o):
            switch name {
            case "items": return bound { _, _, _ in .array(o.entries.map { .array([.string($0.0), $0.1]) }) }
            case "keys": return bound { _, _, _ in .array(o.keys.map { .string($0) }) }
            case "values": return bound { _, _, _ in .array(o.entries.map { $0.1 }) }
            case "get":
                return bound { a, _, l in
                    guard let k = a.first else { throw JinjaError.runtime(line: l, message: "get needs a key") }
                    guard case let .string(key) = k else { return a.count > 1 ? a[1] : .none }
                    return o[key] ?? (a.count > 1 ? a[1] : .none)
                }
            default: return nil
            }
        case .array:
            switch name {
            case "append", "extend", "pop", "insert", "remove", "clear", "sort", "reverse":
                return bound { _, _, l in
                    throw JinjaError.runtime(line: l, message: "list.\(name) modifies a list, which the sandbox (ImmutableSandboxedEnvironment) forbids")
                }
            default: return nil
            }
        default:
            return nil
        }
    }

    /// A method of a value as a callable named after the method.
    static func bound(_ name: String, _ body: @escaping ([JinjaValue], [(String, JinjaValue)], Int) throws -> JinjaValue) -> JinjaValue {
        .callable(JinjaCallable(name, body))
    }

    /// Python `str` methods (`strip`, `split`, `startswith`, `replace`, `format`, …); nil: no such method.
    static func stringMethod(_ s: String, _ name: String) -> JinjaValue? {
        func bound(_ body: @escaping ([JinjaValue], [(String, JinjaValue)], Int) throws -> JinjaValue) -> JinjaValue { Self.bound(name, body) }
        switch name {
        case "strip", "lstrip", "rstrip":
            return bound { a, kw, l in
                let chars = try stringArg(arg(a, kw, 0, "chars"), "\(name)'s chars", line: l)
                return .string(strip(s, chars, leading: name != "rstrip", trailing: name != "lstrip"))
            }
        case "upper": return bound { _, _, _ in .string(s.uppercased()) }
        case "lower": return bound { _, _, _ in .string(s.lowercased()) }
        case "title": return bound { _, _, _ in .string(title(s)) }
        case "capitalize": return bound { _, _, _ in .string(capitalize(s)) }
        case "split", "rsplit":
            return bound { a, kw, l in
                let sep = try stringArg(arg(a, kw, 0, "sep"), "split's separator", line: l)
                let maxSplit = arg(a, kw, 1, "maxsplit")?.intIndex ?? -1
                if let sep {
                    guard !sep.isEmpty else { throw JinjaError.runtime(line: l, message: "empty separator") }
                    if name == "rsplit" && maxSplit >= 0 {
                        let rev = { (x: String) in string(x.unicodeScalars.reversed()) }
                        return .array(split(rev(s), rev(sep), maxSplit: maxSplit).reversed().map { .string(rev($0)) })
                    }
                    return .array(split(s, sep, maxSplit: maxSplit).map { .string($0) })
                }
                return .array(splitWhitespace(s, maxSplit: name == "split" ? maxSplit : -1).map { .string($0) })
            }
        case "splitlines":
            return bound { _, _, _ in
                var lines = split(s.replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\r", with: "\n"), "\n")
                if lines.last == "" { lines.removeLast() }
                return .array(lines.map { .string($0) })
            }
        case "startswith", "endswith":
            return bound { a, _, l in
                guard let p = a.first else { throw JinjaError.runtime(line: l, message: "\(name) needs an argument") }
                var options: [String] = []
                switch p {
                case let .string(x): options = [x]
                case let .array(xs): options = xs.compactMap { if case let .string(x) = $0 { return x } else { return nil } }
                default: throw JinjaError.runtime(line: l, message: "\(name) first arg must be str or a tuple of str")
                }
                let u = scalars(s)
                return .bool(options.contains { o in
                    let w = scalars(o)
                    guard w.count <= u.count else { return false }
                    return name == "startswith" ? u.prefix(w.count).elementsEqual(w) : u.suffix(w.count).elementsEqual(w)
                })
            }
        case "replace":
            return bound { a, _, l in
                guard a.count >= 2, case let .string(old) = a[0], case let .string(new) = a[1] else {
                    throw JinjaError.runtime(line: l, message: "replace needs two strings")
                }
                return .string(replace(s, old, new, count: a.count > 2 ? a[2].intIndex ?? -1 : -1))
            }
        case "find", "index", "count":
            return bound { a, _, l in
                guard case let .string(sub)? = a.first else { throw JinjaError.runtime(line: l, message: "\(name) needs a string") }
                if name == "count" {
                    if sub.isEmpty { return .int(s.unicodeScalars.count + 1) }
                    return .int(split(s, sub).count - 1)
                }
                if let i = find(s, sub) { return .int(i) }
                if name == "index" { throw JinjaError.runtime(line: l, message: "substring not found") }
                return .int(-1)
            }
        case "join":
            return bound { a, _, l in
                guard let items = a.first else { throw JinjaError.runtime(line: l, message: "join needs an iterable") }
                return .string(try JinjaEvaluator.iterate(items, line: l).map { x -> String in
                    guard case let .string(t) = x else { throw JinjaError.runtime(line: l, message: "sequence item: expected str instance, \(x.typeName) found") }
                    return t
                }.joined(separator: s))
            }
        case "isdigit", "isalpha", "isspace", "isalnum", "islower", "isupper":
            return bound { _, _, _ in
                let u = scalars(s)
                guard !u.isEmpty else { return .bool(false) }
                switch name {
                case "isdigit": return .bool(u.allSatisfy { $0.properties.numericType != nil })
                case "isalpha": return .bool(u.allSatisfy { $0.properties.isAlphabetic })
                case "isspace": return .bool(u.allSatisfy(JinjaLexer.isSpace))
                case "isalnum": return .bool(u.allSatisfy { $0.properties.isAlphabetic || $0.properties.numericType != nil })
                case "islower": return .bool(s.lowercased() == s && s.uppercased() != s)
                default: return .bool(s.uppercased() == s && s.lowercased() != s)
                }
            }
        case "format":
            return bound { a, kw, l in .string(try braceFormat(s, a, kw, line: l)) }
        case "removeprefix", "removesuffix":
            return bound { a, _, l in
                guard case let .string(x)? = a.first else { throw JinjaError.runtime(line: l, message: "\(name) needs a string") }
                let u = scalars(s), w = scalars(x)
                if name == "removeprefix", u.count >= w.count, u.prefix(w.count).elementsEqual(w) { return .string(string(u.dropFirst(w.count))) }
                if name == "removesuffix", !w.isEmpty, u.count >= w.count, u.suffix(w.count).elementsEqual(w) { return .string(string(u.dropLast(w.count))) }
                return .string(s)
            }
        default: return nil
        }
    }

    // MARK: globals

    /// `raise_exception`, `namespace`, `range`, `dict` and (when `now` is given) transformers'
    /// `strftime_now`.
    static func globals(now: (() -> Date)?) -> [String: JinjaValue] {
        var g: [String: JinjaValue] = [:]
        g["raise_exception"] = .callable(JinjaCallable("raise_exception") { a, _, l in
            throw JinjaError.raised(line: l, message: a.first.map { (try? JinjaEvaluator.str($0, line: l)) ?? "" } ?? "")
        })
        g["namespace"] = .callable(JinjaCallable("namespace") { a, kw, l in
            var o = JinjaObject()
            for x in a {
                guard case let .object(init0) = x else { throw JinjaError.runtime(line: l, message: "namespace() takes a mapping or keyword arguments") }
                for (k, v) in init0.entries { o[k] = v }
            }
            for (k, v) in kw { o[k] = v }
            return .namespace(JinjaNamespace(o))
        })
        g["dict"] = .callable(JinjaCallable("dict") { a, kw, l in
            var o = JinjaObject()
            if let first = a.first {
                guard case let .object(src) = first else { throw JinjaError.runtime(line: l, message: "dict() takes a mapping or keyword arguments") }
                o = src
            }
            for (k, v) in kw { o[k] = v }
            return .object(o)
        })
        g["range"] = .callable(JinjaCallable("range") { a, _, l in
            let n = try a.map { x -> Int in
                guard let i = x.intIndex else { throw JinjaError.runtime(line: l, message: "range() takes integers") }
                return i
            }
            let (start, stop, step): (Int, Int, Int)
            switch n.count {
            case 1: (start, stop, step) = (0, n[0], 1)
            case 2: (start, stop, step) = (n[0], n[1], 1)
            case 3: (start, stop, step) = (n[0], n[1], n[2])
            default: throw JinjaError.runtime(line: l, message: "range expected 1 to 3 arguments, got \(n.count)")
            }
            guard step != 0 else { throw JinjaError.runtime(line: l, message: "range() arg 3 must not be zero") }
            let count = step > 0 ? max(0, (stop - start + step - 1) / step) : max(0, (start - stop - step - 1) / -step)
            guard count <= 100_000 else { throw JinjaError.runtime(line: l, message: "range of \(count) items is too long (at most 100000)") }
            return .array(stride(from: start, to: stop, by: step).map { .int($0) })
        })
        if let now {
            g["strftime_now"] = .callable(JinjaCallable("strftime_now") { a, _, l in
                guard case let .string(f)? = a.first else { throw JinjaError.runtime(line: l, message: "strftime_now needs a format string") }
                return .string(strftime(f, now()))
            })
        }
        return g
    }

    /// Python's `datetime.now().strftime(format)` for the common directives (local time).
    static func strftime(_ format: String, _ date: Date) -> String {
        let cal = Calendar(identifier: .gregorian)
        let c = cal.dateComponents(in: TimeZone.current, from: date)
        let months = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"]
        let days = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
        func two(_ x: Int?) -> String { String(format: "%02d", x ?? 0) }
        var out = ""
        var it = format.unicodeScalars.makeIterator()
        while let u = it.next() {
            guard u == "%" else { out.unicodeScalars.append(u); continue }
            guard let d = it.next() else { out += "%"; break }
            let month = (c.month ?? 1) - 1, weekday = (c.weekday ?? 1) - 1
            switch d {
            case "d": out += two(c.day)
            case "m": out += two(c.month)
            case "Y": out += String(c.year ?? 0)
            case "y": out += two((c.year ?? 0) % 100)
            case "B": out += months[month]
            case "b": out += String(months[month].prefix(3))
            case "A": out += days[weekday]
            case "a": out += String(days[weekday].prefix(3))
            case "H": out += two(c.hour)
            case "I": out += two(((c.hour ?? 0) + 11) % 12 + 1)
            case "p": out += (c.hour ?? 0) < 12 ? "AM" : "PM"
            case "M": out += two(c.minute)
            case "S": out += two(c.second)
            case "j": out += String(format: "%03d", cal.ordinality(of: .day, in: .year, for: date) ?? 0)
            case "%": out += "%"
            default: out += "%" + String(d)
            }
        }
        return out
    }
}
