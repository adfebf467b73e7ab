import Foundation
import GraphIR
import Interpreter
import Passes
import Diagnostics
import Generation

/// `forge-ir diagnose MODEL [--seq 1,16,2048] [--function NAME] [--precision fp16] [--inputs F.npz]
/// [--prompt-ids 1,2,3] [--dynamic] [--json]`
///
/// Static diagnosis: symbolic shape inference evaluated at every interesting size of the
/// flexible dimensions, plus the state / flexible-shape / fp16 patterns Core ML fails on.
/// Runtime checks on request: `--precision fp16` runs the function with every fp16 op output
/// rounded and names the first op that overflows; `--dynamic` compares S=1 after a prefill with
/// one call of S=N (see `DiagnoseRuntime`).
/// The JSON schema is documented on `Diagnosis.json(modelPath:)` (Sources/Passes/Diagnosis).
enum DiagnoseCommand: Command {
    static let spec = CommandSpec(
        name: "diagnose", reads: .model,
        about: """
        Find why a model fails at some sequence length (shapes, states, flexible shapes, fp16).

        Shapes are inferred without running kernels: each flexible input dimension becomes a
        symbol (dimensions the graph forces equal share one), then the function is evaluated
        at each size and the first op whose shapes are invalid is reported.
        --precision fp16 and --dynamic run the interpreter: on --inputs, or, for a function with
        a generation contract (detected, see dump --summary, or --contract FILE.json), on
        generated calls from fresh states (a prefill of N = min(16, widest call) tokens).
        Exit status: 0 when no error-severity finding, 1 otherwise.
        """,
        options: [
            .intList("seq", value: "n,n,…", "Sequence lengths to check (default: 1, the RangeDim bounds and default, every enumerated size).", range: 0...Int.max),
            CommonOptions.onlyFunction,
            .choice("precision", ["fp32", "fp16"], "fp16: also run the function in fp16 precision and report the first op that overflows to inf/NaN."),
            .option("inputs", value: "file.npz", "Inputs of that run (one call, zeroed states); default for stateful LLMs: generated."),
            .intList("prompt-ids", value: "1,2,3", "Token ids of the generated LLM calls (default: 16 random ids, seed 0, or fewer if the model takes fewer).",
                     range: 0...Int(Int32.max)),
            CommonOptions.threads,
            .flag("dynamic", "Also run S=1 after a prefill of N-1 tokens against one call of N tokens and report the first op whose last row differs."),
            .flag("json", "Machine-readable findings (schema in the README)."),
        ],
        groups: [.contract]
    )

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let path = args.positionals[0]
        let seq = args.ints("seq")
        let model = try ModelLoader.load(path: path)
        var functions: [String]?
        if let name = args.value("function") {
            guard model.program.function(named: name) != nil else {
                throw DiagnoseRequestError("\(path): " + model.program.noFunctionMessage(name))
            }
            functions = [name]
        }
        var request = DiagnoseRuntime.Request()
        request.fp16 = args.precision == .fp16
        request.dynamic = args.flag("dynamic")
        request.promptIDs = args.ints("prompt-ids").map { $0.map { Int32($0) } }
        if args.value("contract") != nil { request.contract = try ContractOption.contract(args, model: model) }
        for (n, a) in try StaticInputOption.arrays(args, contract: request.contract) { request.staticInputs[n] = a }
        if let npz = args.value("inputs") {
            guard request.fp16 else { throw UsageError(message: "--inputs is for the fp16 run: add --precision fp16") }
            request.inputs = try NPZ.read(path: npz)
            request.inputsPath = npz
        }
        var d = Diagnoser.diagnose(model, options: DiagnoseOptions(seq: seq, functions: functions))
        d.findings += try StaticInputOption.findings(args, model: model, functions: functions)
        if request.fp16 || request.dynamic {
            var names = functions ?? model.program.functions.map(\.name)
            if request.inputs != nil, functions == nil { names = [model.defaultFunctionName] }
            try DiagnoseRuntime.run(request, model: model, functions: names, into: &d)
        }
        if !request.fp16 && !request.dynamic,
           model.program.functions.contains(where: { f in (functions?.contains(f.name) ?? true) && (try? GenerationContract.detect(function: f)) != nil }) {
            d.hints.append("stateful LLM: add --dynamic (S=1 after a prefill against one call) and --precision fp16 (fp16 overflow) to check it at run time")
        }
        if args.flag("json") {
            Console.out(d.json(modelPath: path).render(pretty: true) + "\n")
        } else {
            Console.out(d.text(modelPath: path))
        }
        return d.errorCount > 0 ? ExitCode.failure : ExitCode.ok
    }
}
