import Foundation
import GraphIR


/// A function ready to run repeatedly on one state store: the unit of stateful inference.
public final class Session {
    public let model: Model
    public let function: Function
    public let plan: ExecutionPlan
    public let states: StateStore
    public let precision: Precision
    /// Buffers of the explicit KV caches the plan runs in place (``ExecutionPlan/carried``),
    /// by input name: fp32, the input's shape, zeroed; they carry the cache from call to call
    /// instead of an input and an output tensor.
    public let carried: [String: StateBuffer]
    /// The states and the carried buffers, as the plan takes them.
    private let runStates: [String: StateBuffer]

    /// - Parameters:
    ///   - observing: op outputs the plan's ``ExecutionPlan/valueObserver`` will see (fusions
    ///     that would remove them are not applied; see ``ObservedValues``).
    ///   - sharing: another function's states to run on (a prefill / decode pair of one
    ///     package); every state of this function must be there with the same type.
    /// - Throws: `InterpreterError.unsupportedOps` (every op without a kernel), or a state error.
    /// `activations`, `carrying`: see ``ExecutionPlan/init(function:precision:observing:activations:carrying:)``;
    /// an input the plan carries is then not given to ``predict(_:)`` and its output not
    /// returned (the cache lives in ``carried``).
    public init(model: Model, function name: String? = nil, precision: Precision = .fp32, observing: ObservedValues = .none,
                sharing: StateStore? = nil, activations: ActivationQuantization = .exact, carrying: [String: String] = [:]) throws {
        self.model = model
        self.precision = precision
        let fname = name ?? model.defaultFunctionName
        guard let f = model.program.function(named: fname) else {
            throw InterpreterError.unsupported(model.program.noFunctionMessage(fname))
        }
        function = f
        plan = try ExecutionPlan(function: f, precision: precision, observing: observing, activations: activations, carrying: carrying)
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
        var carried: [String: StateBuffer] = [:]
        for v in f.inputs where plan.carried[v.name] != nil {
            guard let shape = v.type.tensorType?.fixedShape else { continue }
            carried[v.name] = try StateBuffer(name: v.name, type: TensorType(.fp32, fixed: shape))
        }
        self.carried = carried
        runStates = states.buffers.merging(carried) { a, _ in a }
        // Loading freed the parsed protobuf and the loader's scratch: hand those heap pages back
        // to the OS before the long-running part starts (glibc keeps them otherwise).
        Memory.releaseFreeMemory()
    }

    /// Runs the function once; states are updated in place. An image input (`ct.ImageType`)
    /// also takes its pixels, uint8 [H, W, 3] RGB (see ``ImageInput``).
    public func predict(_ inputs: [String: Tensor]) throws -> [String: Tensor] {
        guard hasImageInputs else { return try plan.run(inputs: inputs, states: runStates) }
        let converted = try ImageInput.convert(inputs, description: model.description.interface(of: function.name), function: function)
        return try plan.run(inputs: converted, states: runStates)
    }

    /// Zeroes the states and the carried caches.
    public func reset() {
        states.reset()
        for b in carried.values { b.reset() }
    }

    private lazy var hasImageInputs: Bool = model.description.interface(of: function.name).inputs.contains {
        if case .image = $0.kind { return true } else { return false }
    }
}
