import Foundation
import GraphIR


/// A function ready to run repeatedly on one state store: the unit of stateful inference.
public final class Session {
    public let model: Model
    public let function: Function
    public let plan: ExecutionPlan
    public let states: StateStore
    public let precision: Precision

    /// - Parameters:
    ///   - observing: op outputs the plan's ``ExecutionPlan/valueObserver`` will see (fusions
    ///     that would remove them are not applied; see ``ObservedValues``).
    ///   - sharing: another function's states to run on (a prefill / decode pair of one
    ///     package); every state of this function must be there with the same type.
    /// - Throws: `InterpreterError.unsupportedOps` (every op without a kernel), or a state error.
    /// `activations`: see ``ExecutionPlan/init(function:precision:observing:activations:)``.
    public init(model: Model, function name: String? = nil, precision: Precision = .fp32, observing: ObservedValues = .none,
                sharing: StateStore? = nil, activations: ActivationQuantization = .exact) throws {
        self.model = model
        self.precision = precision
        let fname = name ?? model.defaultFunctionName
        guard let f = model.program.function(named: fname) else {
            throw InterpreterError.unsupported(model.program.noFunctionMessage(fname))
        }
        function = f
        plan = try ExecutionPlan(function: f, precision: precision, observing: observing, activations: activations)
        if let shared = sharing {
            for v in f.stateInputs {
                guard let t = v.type.stateWrappedTensor, let b = shared.buffers[v.name],
                      b.dtype == t.dtype, t.shape.map(\.fixedValue) == b.shape.map(Optional.some) else {
                    throw InterpreterError.badState(function: fname, name: v.name, reason: "not among the shared states of function '\(shared.functionName)' with the same type")
                }
            }
            states = shared
        } else {
            states = try StateStore(function: f)
        }
        // Loading freed the parsed protobuf and the loader's scratch: hand those heap pages back
        // to the OS before the long-running part starts (glibc keeps them otherwise).
        Memory.releaseFreeMemory()
    }

    /// Runs the function once; states are updated in place. An image input (`ct.ImageType`)
    /// also takes its pixels, uint8 [H, W, 3] RGB (see ``ImageInput``).
    public func predict(_ inputs: [String: Tensor]) throws -> [String: Tensor] {
        guard hasImageInputs else { return try plan.run(inputs: inputs, states: states.buffers) }
        let converted = try ImageInput.convert(inputs, description: model.description.interface(of: function.name), function: function)
        return try plan.run(inputs: converted, states: states.buffers)
    }

    private lazy var hasImageInputs: Bool = model.description.interface(of: function.name).inputs.contains {
        if case .image = $0.kind { return true } else { return false }
    }
}
