import GraphIR

/// `const_deduplication`: makes identical constants (same type and contents; blobs compared by
/// bytes) one `const`, so the writer stores the weight once.
///
/// ```
/// before:  %a = const(val = W); %b = const(val = W); %y = add(x = %a, y = %b)
/// after:   %a = const(val = W); %y = add(x = %a, y = %a)
/// ```
public struct ConstDeduplication: FunctionPass {
    public static let name = "const_deduplication"
    public static let summary = "Merge constants with identical type and contents."
    public init() {}

    public func run(on function: Function, in model: Model) throws -> PassResult {
        var result = PassResult()
        var seen: [Key: Value] = [:]
        var dead = Set<ObjectIdentifier>()
        for op in function.body.operations where op.type == "const" {
            guard let v = op.constValue, let out = op.outputs.first else { continue }
            let key = Key(v)
            if let first = seen[key] {
                guard !function.body.outputs.contains(where: { $0 === out }) else { continue }
                function.body.replaceAllUses(of: out, with: first)
                dead.insert(ObjectIdentifier(op))
                result.count("constants merged")
            } else {
                seen[key] = out
            }
        }
        function.body.removeOps { dead.contains(ObjectIdentifier($0)) }
        return result
    }

    /// Type plus contents; blob payloads hashed by bytes.
    struct Key: Hashable {
        let type: MILType
        let contents: [UInt8]
        let immediate: ConstValue.Payload?

        init(_ c: ConstValue) {
            type = c.type
            if let blob = c.blob, let raw = try? blob.bytes() {
                contents = Array(raw)
                immediate = nil
            } else {
                contents = []
                immediate = c.payload
            }
        }
    }
}
