import GraphIR

/// Errors from planning and running a function. Each names the function, op or value.
public enum InterpreterError: Error, Equatable, CustomStringConvertible {
    /// Ops without a kernel, all of them, found before anything runs.
    case unsupportedOps(function: String, ops: [String])
    /// A required input was not given.
    case missingInput(function: String, name: String, expected: String)
    /// An input that the function does not take.
    case unexpectedInput(function: String, name: String, known: [String])
    /// Wrong dtype or shape for an input.
    case badInput(function: String, name: String, reason: String)
    /// A state the function takes was not provided, or has the wrong type.
    case badState(function: String, name: String, reason: String)
    /// A kernel refused its operands (shapes, values); names the op.
    case opFailed(op: String, type: String, reason: String)
    /// Something the interpreter does not support (yet).
    case unsupported(String)

    public var description: String {
        switch self {
        case let .unsupportedOps(f, ops):
            return "function '\(f)': no kernel for \(ops.count) op type(s): \(ops.joined(separator: ", "))"
        case let .missingInput(f, n, e): return "function '\(f)': missing input '\(n)' (expected \(e))"
        case let .unexpectedInput(f, n, k):
            return "function '\(f)': unexpected input '\(n)'" + NameSuggestion.hint(n, in: k) + " (inputs: \(k.joined(separator: ", ")))"
        case let .badInput(f, n, r): return "function '\(f)': input '\(n)': \(r)"
        case let .badState(f, n, r): return "function '\(f)': state '\(n)': \(r)"
        case let .opFailed(op, type, r): return "op '\(op)' (\(type)): \(r)"
        case let .unsupported(s): return s
        }
    }
}

/// Thrown by kernels; the plan adds the op's name and type.
public struct KernelError: Error {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }

    /// Checks an output of `count` elements (stored `stride` bytes each) against
    /// ``MemoryBudget`` before it is allocated; `nil` is an overflowed count.
    /// - Throws: `KernelError` saying how much the output needs and the budget.
    public static func checkAllocation(_ count: Int?, stride: Int = 4, shape: @autoclosure () -> [Int]) throws {
        do { try MemoryBudget.check(elements: count, stride: stride, "output shape \(shape())") } catch let e as SizeError {
            throw KernelError(e.description)
        }
    }
}
