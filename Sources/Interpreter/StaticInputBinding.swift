import GraphIR

/// Constant inputs bound to a plan once (a per-layer embedding table and its scales): every
/// later ``ExecutionPlan/run(inputs:states:)`` reads them without the caller passing them, and
/// never copies them — a mapped array stays a view of its file (``MappedArray``).
extension ExecutionPlan {
    /// Binds `array` to the function input `name` for every later run (an input given to `run`
    /// explicitly still wins). Bind before the plan runs (not while another thread runs it).
    /// - Throws: `InterpreterError.badInput` when the function has no such input, or when the
    ///   file's dtype or shape does not fit the declared type (naming the input, the declared
    ///   type and the file's dtype and shape).
    public func bind(_ name: String, to array: MappedArray) throws {
        guard let v = function.inputs.first(where: { $0.name == name && !$0.type.isState }) else {
            let known = function.inputs.filter { !$0.type.isState }.map(\.name)
            throw InterpreterError.badInput(function: function.name, name: name,
                                            reason: "the function has no such input (inputs: \(known.joined(separator: ", ")))")
        }
        let value = try array.runtimeValue(for: v, function: function.name)
        boundInputs[name] = value
        pool.pin(value, forRun: false)
    }

    /// Names of the inputs bound with ``bind(_:to:)``.
    public var boundInputNames: [String] { boundInputs.keys.sorted() }

    /// The bound value of input `name` (for tests and reports: whether it is a mapped view).
    public func boundValue(_ name: String) -> RuntimeValue? { boundInputs[name] }
}
