import GraphIR
import Generation

/// `forge-ir dump MODEL [--function NAME] [--summary] [--json] [--mil]`
enum DumpCommand: Command {
    static let spec = CommandSpec(
        name: "dump", reads: .model,
        about: """
        Print a model's description and MIL text (or a summary, or JSON).

        The MIL text follows the syntax of a compiled model's model.mil (so the two can be
        diffed); weights stored in weight.bin print as BLOBFILE references, inline tensors
        with more than 64 elements as <N values> (not with --mil). For a compiled .mlmodelc the
        description lines say where the description came from (coremldata.bin, metadata.json
        or the function signatures) and what was unknown.
        """,
        options: [
            CommonOptions.onlyFunction,
            .flag("summary", "Op counts, parameters per dtype, state bytes and the generation contract instead of MIL text."),
            .flag("json", "Machine-readable description (with --summary: plus a \"summary\" object)."),
            .flag("mil", "Only the MIL text, nothing elided: the model.mil of a compiled model (read back by .mlmodelc loading)."),
        ]
    )

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let path = args.positionals[0]
        let model = try ModelLoader.load(path: path)
        let only = args.value("function")
        if let only, model.program.function(named: only) == nil {
            throw CLIError("\(path): " + model.program.noFunctionMessage(only))
        }

        if args.flag("mil") {
            Console.out(MILPrinter.print(model, function: only, elideAbove: Int.max))
            return ExitCode.ok
        }

        let contract = Result { try GenerationContract.detect(model: model, function: only) }
        if args.flag("json") {
            var json = DescriptionJSON.json(model, function: only, summary: args.flag("summary"))
            if args.flag("summary"), case var .object(o) = json {
                switch contract {
                case let .success(c): o["generation_contract"] = c.json
                case let .failure(e): o["generation_contract"] = .null; o["generation_contract_error"] = .string("\(e)")
                }
                json = .object(o)
            }
            Console.out(json.render(pretty: true) + "\n")
            return ExitCode.ok
        }

        var out = DescriptionText.model(model, path: path, only: only)
        if args.flag("summary") {
            out += "\n" + summaryText(ModelSummary(model), only: only)
            switch contract {
            case let .success(c): out += "\n" + c.summaryLines.joined(separator: "\n") + "\n"
            case let .failure(e):
                // Only for packages that look like LLMs (states, or logits over the embedding table):
                // an encoder or a classifier is no failed generation contract.
                let f = model.program.function(named: only ?? model.defaultFunctionName)
                if let f, GenerationContract.looksLikeLanguageModel(f) {
                    out += "\ngeneration contract: none (\(e))\n"
                }
            }
        } else {
            out += "\n" + MILPrinter.print(model, function: only)
        }
        Console.out(out)
        return ExitCode.ok
    }

    /// Op count table, parameters per dtype and states of each function; model-wide totals.
    static func summaryText(_ s: ModelSummary, only: String?) -> String {
        var out = ""
        for f in s.functions where only == nil || f.name == only {
            out += "ops (\(f.name)):\n"
            let width = max(16, (f.opCounts.keys.map(\.count).max() ?? 0) + 2)
            for (op, n) in f.opCounts.sorted(by: { $0.key < $1.key }) {
                out += "  " + pad(op, width) + leftPad(String(n), 8) + "\n"
            }
            out += "  " + pad("total", width) + leftPad(String(f.opTotal), 8) + "\n"
            out += "parameters (\(f.name)): \(f.parameterCount)\n"
            out += "stored constants (\(f.name)):\n"
            out += parameterTable(f.parameters)
            out += "states (\(f.name)): \(f.stateCount), \(f.stateBytes) bytes\n"
            for st in f.states {
                out += "  \(st.name): \(st.type.dtype.rawValue) [\(st.type.shape.map(\.description).joined(separator: ", "))] \(st.bytes.map { "\($0) bytes" } ?? "(shape not static)")\n"
            }
            out += "\n"
        }
        if only == nil, s.functions.count > 1 {
            out += "parameters (all functions, shared blobs counted once): \(s.parameterCount)\n"
            out += "stored constants (all functions):\n"
            out += parameterTable(s.parameters)
        }
        out += "weight file: \(s.weightFileBytes) bytes (\(s.blobCount) blob\(s.blobCount == 1 ? "" : "s"), \(s.blobBytes) payload bytes)\n"
        return out
    }

    static func parameterTable(_ p: [DType: ParameterStats]) -> String {
        var out = "  " + pad("dtype", 8) + leftPad("count", 14) + leftPad("bytes", 14) + "\n"
        for (dtype, st) in p.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            out += "  " + pad(dtype.rawValue, 8) + leftPad(String(st.count), 14) + leftPad(String(st.bytes), 14) + "\n"
        }
        let count = p.values.reduce(0) { $0 + $1.count }, bytes = p.values.reduce(0) { $0 + $1.bytes }
        out += "  " + pad("total", 8) + leftPad(String(count), 14) + leftPad(String(bytes), 14) + "\n"
        return out
    }

    static func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s + " " : s + String(repeating: " ", count: n - s.count) }
    static func leftPad(_ s: String, _ n: Int) -> String { s.count >= n ? " " + s : String(repeating: " ", count: n - s.count) + s }
}
