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

    /// A generator on `model` through its contract, refusing contracts with static inputs
    /// (the CLI cannot bind them yet).
    static func generator(_ args: ParsedArguments, model: Model, precision: Precision) throws -> Generator {
        let c = try contract(args, model: model)
        if let name = c.staticInputs.first, let f = model.program.function(named: c.decodeFunction),
           let v = f.inputs.first(where: { $0.name == name }) {
            throw InterpreterError.unsupported("function '\(f.name)' also takes input '\(v.name)' (\(v.type)), a table to bind once; bind it with forge-ir's library API (Generator.boundInputs)")
        }
        let session = try Session(model: model, function: c.decodeFunction, precision: precision,
                                  int8Activations: args.flag("int8-activations"))
        return try Generator(session: session, contract: c)
    }
}
