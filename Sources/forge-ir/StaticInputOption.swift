import Foundation
import GraphIR
import Interpreter
import Generation
import Passes

/// `--static-input NAME=FILE` (run, generate, bench, diagnose): a constant table input (a
/// per-layer embedding table, its scales) memory-mapped once and bound to the function input
/// NAME for every call — `FILE.npy`, or a raw file `FILE:dtype:shape`
/// (`table.bin:int8:262144,8960`; see ``MappedArray``). Repeatable.
enum StaticInputOption {
    static let option = OptionSpec.option(
        "static-input", value: "name=file",
        "Bind a constant table input once, memory-mapped (FILE.npy or raw FILE:dtype:shape, e.g. t.bin:int8:262144,8960; repeatable).")

    /// The `--static-input` items as (input name, file spec), in order.
    /// - Throws: `UsageError` for an item without `NAME=`, or a NAME given twice.
    static func items(_ args: ParsedArguments) throws -> [(name: String, spec: String)] {
        var seen: Set<String> = []
        return try args.values(of: "static-input").map { item in
            guard let eq = item.firstIndex(of: "="), eq != item.startIndex, item.index(after: eq) != item.endIndex else {
                throw UsageError(message: "--static-input takes NAME=FILE.npy or NAME=FILE:dtype:shape, got '\(item)'")
            }
            let name = String(item[..<eq])
            guard seen.insert(name).inserted else { throw UsageError(message: "--static-input \(name) is given twice (one file per input)") }
            return (name, String(item[item.index(after: eq)...]))
        }
    }

    /// The mapped arrays of `--static-input` over those the contract file names (the option wins).
    static func arrays(_ args: ParsedArguments, contract: GenerationContract? = nil) throws -> [(name: String, array: MappedArray)] {
        var specs: [(String, String)] = (contract?.staticInputFiles ?? [:]).sorted { $0.key < $1.key }
        for (n, s) in try items(args) {
            specs.removeAll { $0.0 == n }
            specs.append((n, s))
        }
        return try specs.map { ($0.0, try MappedArray(spec: $0.1)) }
    }

    /// Binds every `--static-input` to `plan`.
    static func bind(_ args: ParsedArguments, plan: ExecutionPlan) throws {
        for (n, a) in try arrays(args) { try plan.bind(n, to: a) }
    }

    /// The one-line error for a static input nothing feeds: its name, dtype and shape, and how
    /// to give it.
    static func missing(_ v: Value, function f: Function) -> GenerationError {
        let type = v.type.tensorType
        let dims = type?.shape.map { $0.fixedValue.map(String.init) ?? "?" } ?? []
        let what = type.map { "\($0.dtype.rawValue) [\(dims.joined(separator: ", "))]" } ?? "\(v.type)"
        let rawSpec = type.map { "FILE:\($0.dtype.rawValue):\(dims.joined(separator: ","))" } ?? "FILE:dtype:shape"
        return GenerationError("function '\(f.name)' takes input '\(v.name)' (\(what)), a constant table nothing feeds: bind it with --static-input \(v.name)=FILE (.npy, or \(rawSpec)), name its file in the contract's \"static_inputs\", or fill it per token with a contract \"provider\" (README: Static inputs)")
    }

    /// diagnose: a `static_input_mismatch` error per `--static-input` whose file's dtype or
    /// shape does not fit the input it is bound to, in each function that takes it.
    /// - Throws: `NPYError` when a file cannot be mapped, `UsageError` for a name no function has.
    static func findings(_ args: ParsedArguments, model: Model, functions: [String]?) throws -> [Finding] {
        var out: [Finding] = []
        for (name, spec) in try items(args) {
            let fs = model.program.functions.filter { f in (functions?.contains(f.name) ?? true) && f.inputs.contains { $0.name == name && !$0.type.isState } }
            guard !fs.isEmpty else {
                let names = Set(model.program.functions.flatMap { $0.inputs.filter { !$0.type.isState }.map(\.name) }).sorted()
                throw UsageError(message: "--static-input \(name): no function takes an input '\(name)'" + NameSuggestion.hint(name, in: names))
            }
            let a = try MappedArray(spec: spec)
            for f in fs {
                let v = f.inputs.first { $0.name == name }!
                do {
                    try InputCheck.check(dtype: a.dtype == .int4 ? .int8 : a.dtype, shape: a.shape, against: v, function: f.name)
                    _ = try a.runtimeValue(for: v, function: f.name)
                } catch let e as InterpreterError {
                    var reason = "\(e)"
                    if case let .badInput(_, _, r) = e { reason = r.components(separatedBy: "; the file ").first ?? r }
                    out.append(Finding(.error, "static_input_mismatch", function: f.name,
                                       shapes: [ShapeNote(name, v.type), ShapeNote("file", dtype: a.dtype, shape: a.shape)],
                                       message: "static input '\(name)' is declared \(v.type) but \(a.path) holds \(a.dtype.rawValue) \(a.shape) (\(reason))",
                                       fix: "Bind the file written for this model (a table of the declared shape), or re-export the model for the table you have."))
                }
            }
        }
        return out
    }
}
