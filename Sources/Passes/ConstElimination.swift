import GraphIR
import Interpreter

/// `const_elimination`: folds an op whose inputs are all constants into a `const`, computing it
/// with the interpreter's kernels; also folds `shape(x)` of a statically shaped `x`.
/// The folded constant keeps the op's declared rank and dtype exactly. Compressed weights
/// (`constexpr_*`) are never expanded, and a result larger than its inputs (over
/// `maxGrowthElements`) is not folded, so folding never inflates the package.
///
/// ```
/// before:  %a = const(val = [1, 2]); %b = const(val = [3, 4]); %c = add(x = %a, y = %b)
/// after:   %c = const(val = [4, 6])
/// ```
public struct ConstElimination: FunctionPass {
    public static let info = PassInfo("const_elimination", "Fold ops with constant inputs into constants (never expands compressed weights).")
    /// A result may exceed the summed size of its inputs by at most this many elements.
    public static let maxGrowthElements = 1024
    /// Fold only ops whose outputs are all integer or bool tensors (shape arithmetic): float
    /// results stay computed at run time, in the precision the run chooses
    /// (`specialize_sequence` uses this so its static functions compute what the flexible one did).
    public var integerOnly = false
    public init() {}
    public init(integerOnly: Bool) { self.integerOnly = integerOnly }

    public func run(on function: Function, in model: Model) throws -> PassResult {
        var result = PassResult()
        var constOf: [ObjectIdentifier: ConstValue] = [:]
        func fold(_ block: Block) throws {
            var ops = block.operations
            var i = 0
            while i < ops.count {
                let op = ops[i]
                i += 1
                if op.type == "const", let v = op.constValue, let out = op.outputs.first {
                    constOf[ObjectIdentifier(out)] = v
                    continue
                }
                for b in op.blocks { try fold(b) }
                if integerOnly, !op.outputs.allSatisfy({ $0.type.tensorType.map { $0.dtype.isInteger || $0.dtype == .bool } ?? false }) { continue }
                guard let replacement = try foldable(op, constOf: constOf) else { continue }
                let newOps = replacement.map { Op.const($0.0.name, $0.1) }
                for (k, (old, _)) in replacement.enumerated() {
                    constOf[ObjectIdentifier(newOps[k].outputs[0])] = newOps[k].constValue
                    block.replaceAllUses(of: old, with: newOps[k].outputs[0])
                    function.body.replaceAllUses(of: old, with: newOps[k].outputs[0])
                }
                let idx = ops.firstIndex { $0 === op }!
                ops.replaceSubrange(idx...idx, with: newOps)
                i = idx + newOps.count
                result.count("ops folded")
            }
            block.setOperations(ops)
        }
        try fold(function.body)
        return result
    }

    /// The folded outputs of `op`, or nil when it cannot or should not be folded.
    func foldable(_ op: Op, constOf: [ObjectIdentifier: ConstValue]) throws -> [(Value, ConstValue)]? {
        guard let schema = OpRegistry.schema(op.type), !schema.isConstant, !schema.hasSideEffects,
              !schema.isControlFlow, !op.outputs.isEmpty, op.blocks.isEmpty,
              !op.type.hasPrefix("random_") else { return nil }   // a draw is not a constant
        // shape(x) with a static x.
        if op.type == "shape", let x = op.operand("x")?.type.tensorType, let shape = x.fixedShape,
           let outType = op.outputs[0].type.tensorType {
            let t = Tensor(.int32, shape: [shape.count], ints: shape.map { Int32($0) })
            let type = TensorType(outType.dtype, fixed: [shape.count])
            return ConstEncoding.constValue(t, type: type).map { [(op.outputs[0], $0)] }
        }
        guard let kernel = KernelRegistry.kernel(for: op.type) else { return nil }
        var values: [String: [RuntimeValue]] = [:]
        var inputElements = 0
        for input in op.inputs {
            var vs: [RuntimeValue] = []
            for operand in input.operands {
                let c: ConstValue
                switch operand {
                case let .value(v):
                    guard let k = constOf[ObjectIdentifier(v)] else { return nil }
                    c = k
                case let .constant(k): c = k
                }
                guard let t = try? ConstConversion.tensor(c) else { return nil }
                inputElements += t.count
                vs.append(.tensor(t))
            }
            values[input.name] = vs
        }
        guard let results = try? kernel(KernelInvocation(op: op, precision: .fp32, values: values)),
              results.count == op.outputs.count else { return nil }
        var out: [(Value, ConstValue)] = []
        var outputElements = 0
        for (r, v) in zip(results, op.outputs) {
            guard case var .tensor(t) = r, let declared = v.type.tensorType else { return nil }
            outputElements += t.count
            // Keep the declared rank and dtype exactly; the static shape comes from the result.
            guard t.shape.count == declared.rank else { return nil }
            for (d, n) in zip(declared.shape, t.shape) { if let f = d.fixedValue, f != n { return nil } }
            t.dtype = declared.dtype
            Rounding.toStorage(&t)
            guard let c = ConstEncoding.constValue(t, type: TensorType(declared.dtype, fixed: t.shape)) else { return nil }
            out.append((v, c))
        }
        guard outputElements <= inputElements + Self.maxGrowthElements else { return nil }
        return out
    }
}
