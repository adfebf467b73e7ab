import GraphIR

/// `const_deduplication`: makes identical constants (same type and contents; blobs compared by
/// bytes) one `const`, so the writer stores the weight once.
///
/// ```
/// before:  %a = const(val = W); %b = const(val = W); %y = add(x = %a, y = %b)
/// after:   %a = const(val = W); %y = add(x = %a, y = %a)
/// ```
public struct ConstDeduplication: FunctionPass {
    public static let info = PassInfo("const_deduplication", "Merge constants with identical type and contents.")
    public init() {}

    public func run(on function: Function, in model: Model) throws -> PassResult {
        DuplicateMerging.merge(function, counting: "constants merged") { op -> Key? in
            guard op.type == "const", let v = op.constValue, op.outputs.count == 1 else { return nil }
            return Key(v)
        }
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
