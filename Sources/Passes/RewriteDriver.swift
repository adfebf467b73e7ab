import GraphIR

/// A local rewrite: looks at one op and, if it applies, edits the block and returns true.
/// Patterns use ``RewriteContext`` to replace values and erase ops so that the driver can
/// re-queue the affected users.
public typealias RewritePattern = (Op, RewriteContext) throws -> Bool

/// The editing interface a pattern gets.
public final class RewriteContext {
    public let function: Function
    public let model: Model
    var changed: [Op] = []
    var erased = Set<ObjectIdentifier>()
    public var names: NameGenerator

    init(function: Function, model: Model) {
        self.function = function
        self.model = model
        self.names = NameGenerator(function)
    }

    /// Replaces every use of `old` with `new`; users are re-queued.
    public func replaceAllUses(of old: Value, with new: Value) {
        for u in UseMap(function).users(of: old) { changed.append(u) }
        function.body.replaceAllUses(of: old, with: new)
    }

    /// Removes `op` from its block.
    public func erase(_ op: Op) {
        erased.insert(ObjectIdentifier(op))
        op.parent?.removeOps { $0 === op }
    }

    /// Inserts `new` right before `anchor` in its block.
    public func insert(_ new: Op, before anchor: Op) {
        guard let block = anchor.parent, let i = block.index(of: anchor) else { return }
        block.insert(new, at: i)
        changed.append(new)
    }
}

/// One worklist rewrite driver for pattern passes (MLIR's greedy driver): each op is tried
/// against the patterns in order; when one applies, the ops it touched are queued again; stops at
/// a fixed point or after `maxRewrites`.
public enum RewriteDriver {
    /// - Returns: how many rewrites applied.
    @discardableResult
    public static func run(_ function: Function, in model: Model, patterns: [RewritePattern], maxRewrites: Int = 100_000) throws -> Int {
        let ctx = RewriteContext(function: function, model: model)
        var worklist: [Op] = []
        func collect(_ b: Block) { for op in b.operations { worklist.append(op); for nb in op.blocks { collect(nb) } } }
        collect(function.body)
        worklist.reverse()  // pop from the end = program order
        var queued = Set(worklist.map { ObjectIdentifier($0) })
        var applied = 0
        while let op = worklist.popLast() {
            queued.remove(ObjectIdentifier(op))
            if ctx.erased.contains(ObjectIdentifier(op)) || op.parent == nil { continue }
            for pattern in patterns {
                ctx.changed = []
                if try pattern(op, ctx) {
                    applied += 1
                    if applied >= maxRewrites { return applied }
                    for c in ctx.changed where !queued.contains(ObjectIdentifier(c)) && !ctx.erased.contains(ObjectIdentifier(c)) {
                        worklist.append(c)
                        queued.insert(ObjectIdentifier(c))
                    }
                    break
                }
            }
        }
        return applied
    }
}
