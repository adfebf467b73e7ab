/// Why a template could not be parsed or rendered. `line` is the 1-based line of the template
/// source where the problem is (after `\r\n` / `\r` became `\n`, as Jinja2 counts lines).
public enum JinjaError: Error, Equatable, CustomStringConvertible {
    /// The template text is not valid in the supported subset (Jinja2's TemplateSyntaxError).
    case syntax(line: Int, message: String)
    /// Rendering failed: an unknown filter, a type error, an undefined value used where a value
    /// is needed (Jinja2's TypeError / UndefinedError).
    case runtime(line: Int, message: String)
    /// The template called `raise_exception(message)` (transformers' TemplateError).
    case raised(line: Int, message: String)

    public var line: Int {
        switch self {
        case let .syntax(l, _), let .runtime(l, _), let .raised(l, _): return l
        }
    }

    public var message: String {
        switch self {
        case let .syntax(_, m), let .runtime(_, m), let .raised(_, m): return m
        }
    }

    public var description: String {
        switch self {
        case let .syntax(l, m): return "line \(l): syntax error: \(m)"
        case let .runtime(l, m): return "line \(l): \(m)"
        case let .raised(l, m): return "line \(l): raise_exception: \(m)"
        }
    }
}
