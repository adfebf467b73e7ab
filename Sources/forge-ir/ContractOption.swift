import GraphIR
import Interpreter
import Generation

/// `--contract FILE.json` (generate, bench, diagnose): the generation contract read from a file
/// (schema in README "Generation contracts"), else detected from the package.
enum ContractOption {
    static let option = OptionSpec.option("contract", value: "FILE.json",
                                          "Generation contract (roles of inputs/outputs/states; README: Generation contracts) instead of the detected one.")

    /// The contract of `model`: from `--contract`, else detected (on `--function` if given).
    /// - Throws: `GenerationError` (one line: roles found, missing, the `--contract` hint).
    static func contract(_ args: ParsedArguments, model: Model) throws -> GenerationContract {
        if let path = args.value("contract") { return try GenerationContract(contentsOf: path, model: model) }
        return try GenerationContract.detect(model: model, function: args.value("function"))
    }

    /// A generator on `model` through its contract, its static inputs bound (`--static-input`
    /// over the contract file's `static_inputs` files, each mapped once) and its provider added.
    /// - Throws: `GenerationError` for a static input nothing feeds (naming it, its dtype and
    ///   shape), `NPYError` for a file that cannot be mapped, `InterpreterError.badInput` when a
    ///   file's dtype or shape does not fit its input.
    static func generator(_ args: ParsedArguments, model: Model, precision: Precision) throws -> Generator {
        let c = try contract(args, model: model)
        let session = try Session(model: model, function: c.decodeFunction, precision: precision,
                                  activations: try args.activations())
        let g = try Generator(session: session, contract: c)
        ActivationNote.print(session.plan.activations, precision: precision, functions: g.sessions.map(\.function))
        for (name, array) in try StaticInputOption.arrays(args, contract: c) { try g.bind(name, to: array) }
        if let p = c.provider { try g.add(TableRowProvider(p)) }
        if let (f, v) = g.unfedStaticInputs.first { throw StaticInputOption.missing(v, function: f) }
        return g
    }
}
