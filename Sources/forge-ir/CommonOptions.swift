import Foundation
import GraphIR
import Interpreter

/// Options several verbs share, declared once; `main` applies `--threads` and `--max-memory`
/// before the verb runs. Verbs take most of them as whole ``OptionGroup``s.
enum CommonOptions {
    /// The model a verb reads (every loader form).
    static let model = PositionalSpec(name: "model", help: ".mlpackage or .mlmodelc folder, or .mlmodel file (ML Program).")
    /// The model of the LLM verbs (`generate`, `bench`).
    static let llmModel = PositionalSpec(name: "model", help: ".mlpackage or .mlmodelc of an LLM (its generation contract is detected; see dump --summary).")
    static let precision = OptionSpec.choice("precision", ["fp32", "fp16"],
        "fp32: Core ML CPU numerics (default); fp16: round every fp16 op output like GPU/ANE.")
    static let threads = OptionSpec.int("threads", "Threads for the kernels (default: the CPUs this process may use; 1 = no pool).",
                                        range: 1...256)
    static let function = OptionSpec.option("function", value: "name", "Function to use (default: the model's default function).")
    /// `--function` of the verbs that look at every function unless told (`dump`, `diagnose`).
    static let onlyFunction = OptionSpec.option("function", value: "name", "Only this function (default: every function).")
    static let json = OptionSpec.flag("json", "Print the result as JSON.")
    static let int8Activations = OptionSpec.flag("int8-activations", "Same as --activations int8.")
    static let activations = OptionSpec.choice("activations", ActivationQuantization.allCases.map(\.rawValue),
        "Activations of quantized-weight products: fp32 (exact, default), int16 or int8 (llama.cpp Q8_0 style) per block of 32 (not Core ML's numerics); int16 applies to int8 weights only (int4 weights take fp32 or int8).")
    static let maxMemory = OptionSpec.option(
        "max-memory", value: "bytes",
        "Largest allocation from sizes a file declares (e.g. 4G, 512M; default: half of RAM).")

    /// Applies the options of ``OptionGroup/kernels`` and ``OptionGroup/loading`` that act on
    /// the process (`--threads`, `--max-memory`); `main` calls it before the verb runs.
    static func apply(_ args: ParsedArguments) throws {
        // The kernels' thread pool starts on first use and reads FORGE_THREADS then.
        if let n = args.int("threads") { setenv("FORGE_THREADS", String(n), 1) }
        guard let text = args.value("max-memory") else { return }
        guard let bytes = MemoryBudget.parse(text) else {
            throw UsageError("--max-memory takes a size in bytes such as 4G, 512M or 1048576, not '\(text)'")
        }
        MemoryBudget.limit = bytes
    }
}

/// Options that go together, declared once and taken whole by every verb they concern, so that
/// one option means the same, with the same help, in every verb (`CommandSpec(groups:)` appends
/// them after the verb's own options).
struct OptionGroup {
    var options: [OptionSpec]

    /// What loading a model may allocate (`--max-memory`): every verb that reads a model
    /// (``CommandSpec`` appends it, last, for every ``VerbInput`` but `.arguments`).
    static let loading = OptionGroup(options: [CommonOptions.maxMemory])
    /// How the kernels compute (`--precision`, `--activations`, `--int8-activations`, `--threads`): the verbs that
    /// run a function for its outputs (`run`, `generate`, `bench`).
    static let kernels = OptionGroup(options: [CommonOptions.precision, CommonOptions.activations, CommonOptions.int8Activations,
                                               CommonOptions.threads])
    /// What feeds an LLM function besides its tokens (`--contract`, `--static-input`): the verbs
    /// that build generation calls (`generate`, `bench`, `diagnose`).
    static let contract = OptionGroup(options: [ContractOption.option, StaticInputOption.option])
}

/// One-line error text for the CLI: Foundation file errors as `path: reason` (never the raw
/// `NSCocoaErrorDomain` text), and a path or phrase repeated by nested errors printed once.
enum ErrorText {
    static func describe(_ error: Error) -> String {
        let text = FileErrorText.text(error).split(whereSeparator: \.isNewline).joined(separator: " ")
        return dedupe(text)
    }

    /// `a: a: b` → `a: b`: a segment repeated right after itself (a path named by an error and
    /// again by the error wrapping it) is kept once.
    static func dedupe(_ text: String) -> String {
        var out: [Substring] = []
        for seg in text.split(separator: ": ", omittingEmptySubsequences: false) {
            if let last = out.last, last == seg { continue }
            out.append(seg)
        }
        return out.joined(separator: ": ")
    }
}
