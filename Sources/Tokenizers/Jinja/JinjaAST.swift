/// An expression of the Jinja subset. `line` is the template line for error messages.
indirect enum JinjaExpr {
    case literal(JinjaValue)
    case name(String, line: Int)
    /// A list or tuple literal.
    case list([JinjaExpr])
    case dict([(JinjaExpr, JinjaExpr)], line: Int)
    /// `x.name` (attribute, then item, as Jinja2's `getattr`).
    case getattr(JinjaExpr, String, line: Int)
    /// `x[key]` (item, then attribute).
    case getitem(JinjaExpr, JinjaExpr, line: Int)
    /// `x[start:stop:step]`.
    case slice(JinjaExpr, JinjaExpr?, JinjaExpr?, JinjaExpr?, line: Int)
    case call(JinjaExpr, [JinjaExpr], [(String, JinjaExpr)], line: Int)
    /// `x | name(args)`.
    case filter(JinjaExpr, String, [JinjaExpr], [(String, JinjaExpr)], line: Int)
    /// `x is [not] name(args)`.
    case test(JinjaExpr, String, [JinjaExpr], negated: Bool, line: Int)
    /// `not`, unary `-` and `+`.
    case unary(String, JinjaExpr, line: Int)
    /// `+ - * / // % ** ~ and or`.
    case binary(String, JinjaExpr, JinjaExpr, line: Int)
    /// A chain `a op b op c` of `== != < <= > >= in notin`.
    case compare(JinjaExpr, [(String, JinjaExpr)], line: Int)
    /// `then if condition else otherwise` (a missing else is undefined).
    case conditional(then: JinjaExpr, condition: JinjaExpr, otherwise: JinjaExpr?, line: Int)
}

/// Where `{% set %}` stores: names (several for tuple unpacking) or a namespace attribute.
enum JinjaSetTarget {
    case names([String])
    case attribute(namespace: String, attribute: String)
}

/// A statement (or text) of a parsed template.
indirect enum JinjaNode {
    case text(String)
    case output(JinjaExpr, line: Int)
    case ifBlock([(JinjaExpr, [JinjaNode])], otherwise: [JinjaNode])
    case forLoop(targets: [String], iterable: JinjaExpr, filter: JinjaExpr?, body: [JinjaNode], otherwise: [JinjaNode], line: Int)
    case set(JinjaSetTarget, JinjaExpr, line: Int)
    /// `{% set x %}…{% endset %}`: the rendered body, through optional filters.
    case setBlock(JinjaSetTarget, body: [JinjaNode], filters: [(String, [JinjaExpr], [(String, JinjaExpr)])], line: Int)
    case macro(name: String, parameters: [(String, JinjaExpr?)], body: [JinjaNode], line: Int)
    /// `{% filter name %}…{% endfilter %}`.
    case filterBlock(name: String, args: [JinjaExpr], kwargs: [(String, JinjaExpr)], body: [JinjaNode], line: Int)
    case breakLoop(line: Int)
    case continueLoop(line: Int)
}
