import Foundation
import GraphIR
import Passes

/// `forge-ir diagnose MODEL [--seq 1,16,2048] [--function NAME] [--json]`
///
/// Static diagnosis: symbolic shape inference evaluated at every interesting size of the
/// flexible dimensions, plus the state / flexible-shape / fp16 patterns Core ML fails on.
/// The JSON schema is documented on `Diagnosis.json(modelPath:)` (Sources/Passes/Diagnosis).
enum DiagnoseCommand: Command {
    static let spec = CommandSpec(
        name: "diagnose",
        summary: "Find why a model fails at some sequence length (shapes, states, flexible shapes, fp16).",
        positionals: [PositionalSpec(name: "model", help: ".mlpackage folder or .mlmodel file (ML Program).")],
        options: [
            .option("seq", value: "n,n,…", "Sequence lengths to check (default: 1, the RangeDim bounds and default, every enumerated size)."),
            .option("function", value: "name", "Only this function (default: every function)."),
            .flag("json", "Machine-readable findings (schema in the README)."),
        ],
        discussion: """
        Shapes are inferred without running kernels: each flexible input dimension becomes a
        symbol (dimensions the graph forces equal share one), then the function is evaluated
        at each size and the first op whose shapes are invalid is reported.
        Exit status: 0 when no error-severity finding, 1 otherwise.
        """
    )

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let path = args.positionals[0]
        var seq: [Int]?
        if let s = args.value("seq") {
            var values: [Int] = []
            for part in s.split(separator: ",") {
                guard let v = Int(part.trimmingCharacters(in: .whitespaces)), v >= 0 else {
                    throw UsageError(message: "--seq takes comma-separated non-negative integers, got '\(s)'", helpCommand: "forge-ir diagnose")
                }
                values.append(v)
            }
            guard !values.isEmpty else { throw UsageError(message: "--seq needs at least one length", helpCommand: "forge-ir diagnose") }
            seq = values
        }
        let model = try ModelLoader.load(path: path)
        var functions: [String]?
        if let name = args.value("function") {
            guard model.program.function(named: name) != nil else {
                let names = model.program.functions.map(\.name).joined(separator: ", ")
                throw DiagnoseCLIError("\(path): no function '\(name)' (functions: \(names))")
            }
            functions = [name]
        }
        let d = Diagnoser.diagnose(model, options: DiagnoseOptions(seq: seq, functions: functions))
        if args.flag("json") {
            Console.out(d.json(modelPath: path).render(pretty: true) + "\n")
        } else {
            Console.out(d.text(modelPath: path))
        }
        return d.errorCount > 0 ? ExitCode.failure : ExitCode.ok
    }
}

struct DiagnoseCLIError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}
