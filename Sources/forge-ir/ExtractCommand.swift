import Foundation
import GraphIR
import Passes

/// `forge-ir extract MODEL --from V1[,V2…] --to W1[,W2…] -o SUB.mlpackage`.
enum ExtractCommand: Command {
    static let spec = CommandSpec(
        name: "extract", reads: .model,
        about: """
        Write the subgraph between named values as a new package (coremltools' extract_submodel).

        Inputs are the --from values with their types (unknown dimensions inferred symbolically
        from the function's inputs: an input's flexible dimension keeps its RangeDim), plus any
        original input the slice still reads (states included); outputs are the --to values;
        the ops in between keep their names and weights. Names as 'forge-ir dump' prints them.
        """,
        options: [
            .option("from", value: "v1,v2", "Values that become the inputs (default: the function's own inputs)."),
            .option("to", value: "w1,w2", "Values that become the outputs (required)."),
            .option("o", value: "out.mlpackage", "Where to write the package (required; written atomically)."),
            CommonOptions.function,
        ]
    )

    static func names(_ text: String?) -> [String] {
        (text ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let to = names(args.value("to"))
        guard !to.isEmpty else { throw UsageError(message: "--to V[,V…] is required") }
        guard let out = args.value("o") else { throw UsageError(message: "-o OUT.mlpackage is required") }
        try InputOverwriteCheck.refuse(output: out, sameAs: args.positionals[0])
        let model = try ModelLoader.load(path: args.positionals[0])
        let sub = try SubgraphExtraction.extract(model, function: args.value("function"), from: names(args.value("from")), to: to)
        try Verifier.verify(sub)
        try ModelWriter.writePackage(sub, to: out)
        let f = sub.program.functions[0]
        var n = 0
        f.body.walk { _ in n += 1 }
        Console.err("wrote \(out): \(n) ops, inputs \(f.inputs.map(\.name).joined(separator: ", ")), outputs \(f.outputs.map(\.name).joined(separator: ", "))\n")
        return ExitCode.ok
    }
}
