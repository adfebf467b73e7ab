import Foundation
import GraphIR


/// A function ready to run repeatedly on one state store: the unit of stateful inference.
public final class Session {
    public let model: Model
    public let function: Function
    public let plan: ExecutionPlan
    public let states: StateStore

    /// - Parameter observing: op outputs the plan's ``ExecutionPlan/valueObserver`` will see
    ///   (fusions that would remove them are not applied; see ``ObservedValues``).
    /// - Throws: `InterpreterError.unsupportedOps` (every op without a kernel), or a state error.
    public init(model: Model, function name: String? = nil, precision: Precision = .fp32, observing: ObservedValues = .none) throws {
        self.model = model
        let fname = name ?? model.defaultFunctionName
        guard let f = model.program.function(named: fname) else {
            throw InterpreterError.unsupported(model.program.noFunctionMessage(fname))
        }
        function = f
        plan = try ExecutionPlan(function: f, precision: precision, observing: observing)
        states = try StateStore(function: f)
        // Loading freed the parsed protobuf and the loader's scratch: hand those heap pages back
        // to the OS before the long-running part starts (glibc keeps them otherwise).
        Memory.releaseFreeMemory()
    }

    /// Runs the function once; states are updated in place.
    public func predict(_ inputs: [String: Tensor]) throws -> [String: Tensor] {
        try plan.run(inputs: inputs, states: states.buffers)
    }
}
