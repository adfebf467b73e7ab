import GraphIR

/// The sweep `const_deduplication` and `common_subexpression_elimination` share. The ops of the
/// function body are visited in order, each keyed by `key` (nil: never merged); an op whose key
/// an earlier op has is merged into that one (the uses of its outputs read the earlier op's
/// outputs instead) and removed, each merge counted under `statistic`. An op one of whose
/// outputs the function returns is kept (the description names that output). An op is keyed
/// after the merges before it, so operands already redirected are the same value.
enum DuplicateMerging {
    static func merge<Key: Hashable>(_ function: Function, counting statistic: String, key: (Op) -> Key?) -> PassResult {
        var result = PassResult()
        var seen: [Key: Op] = [:]
        var dead = Set<ObjectIdentifier>()
        let body = function.body
        for op in body.operations {
            guard let k = key(op) else { continue }
            guard let first = seen[k] else {
                seen[k] = op
                continue
            }
            if op.outputs.contains(where: { o in body.outputs.contains { $0 === o } }) { continue }
            for (a, b) in zip(op.outputs, first.outputs) { body.replaceAllUses(of: a, with: b) }
            dead.insert(ObjectIdentifier(op))
            result.count(statistic)
        }
        body.removeOps { dead.contains(ObjectIdentifier($0)) }
        return result
    }
}
