import GraphIR

/// The two shapes of rewrite pass, each driven once here so that a pass states only what it
/// matches and what it writes.
///
/// - ``OpRewritePass``: one sweep. The anchors (ops the pass looks at) are collected in program
///   order, nested blocks included, before anything changes; each is offered to `rewrite` once
///   (the fix passes: `exact_rms_norm`, `log_softmax_stable`, `pad_slice_update`, …).
/// - ``PatternPass``: one pattern run to a fixed point by ``RewriteDriver`` (ops the pattern
///   touched are tried again), each rewrite counted under `statistic`
///   (`noop_elimination`, `lower_slice_update`).

/// A pass that sweeps once over the ops `isAnchor` selects and rewrites each where its pattern
/// holds (see ``RewriteSite`` for what a rewrite gets).
public protocol OpRewritePass: FunctionPass {
    /// Whether the sweep offers `op` to `rewrite`.
    static func isAnchor(_ op: Op) -> Bool
    /// Rewrites `anchor` when the pattern holds; counts what it did with `site.count`.
    /// - Throws: only for a program the pass cannot leave valid (the sweep stops).
    func rewrite(_ anchor: Op, in site: RewriteSite) throws
}

extension OpRewritePass {
    public func run(on function: Function, in model: Model) throws -> PassResult {
        var anchors: [Op] = []
        function.body.walk { if Self.isAnchor($0) { anchors.append($0) } }
        let site = RewriteSite(function)
        for op in anchors { try rewrite(op, in: site) }
        return site.result
    }
}

/// What one sweep of an ``OpRewritePass`` gives each rewrite: the function, an ``OpMaker`` for
/// the new ops (uniquely named, inserted before an anchor by `make.flush(before:)`), the use map
/// and the result it counts into.
public final class RewriteSite {
    public let function: Function
    var make: OpMaker
    private(set) var result = PassResult()
    /// The users of every value, built at the first read and not updated after: a pass reading
    /// it reads it from its first rewrite on, so it sees the program before the sweep changed
    /// it. A rewrite that needs the uses after earlier rewrites builds its own `UseMap`.
    private(set) lazy var uses = UseMap(function)

    init(_ function: Function) {
        self.function = function
        make = OpMaker(function)
    }

    /// Adds `n` to the counter `key` of the pass result (and marks the program changed).
    func count(_ key: String, _ n: Int = 1) { result.count(key, n) }
}

/// A pass that is one rewrite pattern run by ``RewriteDriver`` to a fixed point.
public protocol PatternPass: FunctionPass {
    /// The counter of the pass result that counts the rewrites, e.g. "ops removed".
    static var statistic: String { get }
    /// Rewrites `op` through `ctx` when the pattern holds; returns whether it did.
    static func pattern(_ op: Op, _ ctx: RewriteContext) throws -> Bool
}

extension PatternPass {
    public func run(on function: Function, in model: Model) throws -> PassResult {
        var result = PassResult()
        result.count(Self.statistic, try RewriteDriver.run(function, in: model, patterns: [Self.pattern]))
        return result
    }
}
