import Foundation

/// A parsed template in the Jinja subset that Hugging Face chat templates use, rendered as
/// transformers' `apply_chat_template` renders them: Jinja2 3.1 in an
/// `ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)`, `tojson` as
/// `json.dumps(ensure_ascii=False)`, the globals `raise_exception` and `strftime_now`, and the
/// loop controls `break` / `continue`.
///
/// Supported: `{{ }}`, `{% %}`, `{# #}` with `-` / `+` whitespace control; `if` / `elif` / `else`,
/// `for … in … [if …]` with `else` and `loop` (`index`, `index0`, `revindex`, `revindex0`,
/// `first`, `last`, `length`, `previtem`, `nextitem`, `cycle`), `set` (names, tuples,
/// `ns.attr`, block form), `macro` (defaults, keyword arguments), `filter` blocks, `raw`,
/// `generation`; literals (strings, numbers, lists, tuples, dicts, booleans, none), `+ - * / //
/// % ** ~`, comparisons, `in`, `not in`, `and` / `or` / `not`, `x if c else y`, attributes,
/// items, slices, calls; the filters and tests of `JinjaBuiltins`; `str` / `dict` methods.
///
/// Not supported (a syntax error names them): `include` / `import` / `extends` / `block`,
/// `call` blocks, recursive loops, `*args` / `**kwargs`.
///
/// Bounded: nesting of at most 100 statements or brackets, calls 64 deep, `maxSteps` loop
/// iterations and calls, 64 MB of text (errors naming the line, never a hang or a crash).
public struct JinjaTemplate: @unchecked Sendable {
    /// The source as given.
    public let source: String
    let nodes: [JinjaNode]
    /// Loop iterations plus macro calls one render may take before it is an error (a template
    /// that would run for hours); chat templates take a few per message.
    public var maxSteps = JinjaTemplate.defaultMaxSteps
    public static let defaultMaxSteps = 1_000_000

    /// - Throws: `JinjaError.syntax` naming the line.
    public init(_ source: String) throws {
        self.source = source
        var lexer = JinjaLexer(source)
        var parser = JinjaParser(try lexer.tokenize())
        nodes = try parser.parseTemplate()
    }

    /// Renders with `context` as the template's variables (on top of the globals
    /// `raise_exception`, `namespace`, `range`, `dict` and, unless `now` is nil, `strftime_now`).
    /// - Throws: `JinjaError.runtime` or `.raised` naming the line.
    public func render(_ context: [String: JinjaValue], now: (() -> Date)? = { Date() }) throws -> String {
        let globals = JinjaScope(parent: nil, JinjaBuiltins.globals(now: now))
        let top = JinjaScope(parent: globals, context)
        var evaluator = JinjaEvaluator(state: JinjaEvaluator.State(maxSteps: maxSteps))
        return try evaluator.render(nodes, scope: top)
    }
}
