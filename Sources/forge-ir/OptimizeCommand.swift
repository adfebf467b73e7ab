import Foundation
import GraphIR
import JSON
import Passes

/// `forge-ir optimize IN -o OUT [--fix] [--passes a,b,c] [--pipeline NAME] [--print-ir-after-all]
/// [--print-ir-after-change] [--time-passes] [--json]`
///
/// Passes run in this order: the fix passes `diagnose` proposes for the model (`--fix`), then
/// `--passes`, then `--pipeline` (default: `default`; with `--fix` or `--passes` alone:
/// none, resp. `cleanup` after `--fix`).
enum OptimizeCommand: Command {
    static let spec = CommandSpec(
        name: "optimize", reads: .model,
        about: """
        Run passes over a model and write the result as an .mlpackage (atomically).

        Prints a table of op counts before and after, like onnx-simplifier. The verifier runs
        after every pass; the output is written to a temporary folder and renamed into place.
        --fix runs diagnose first and applies the fix pass of every finding that has one
        (e.g. lower_slice_update, widen_gather_index, exact_rms_norm), then --passes, then the
        pipeline (cleanup unless --pipeline says otherwise), and lists the findings fixed and
        those left.
        An existing -o is replaced only when it is an .mlpackage forge-ir recognises (nothing
        but Manifest.json and the items it lists); anything else needs --force. Temporary
        folders left by a killed run (<out>.tmp-*, <out>.old-*) are cleaned up by the next one.
        """,
        options: [
            .option("o", value: "out.mlpackage", "Where to write the optimized package (required)."),
            .option("pipeline", value: "name", "default | cleanup | empty (default: default; after --passes: none; after --fix: cleanup)."),
            .option("passes", value: "a,b,c", "Run these passes, in order (before --pipeline when both are given)."),
            .flag("fix", "Apply every fix pass diagnose proposes for this model, then the cleanup pipeline; print what was fixed."),
            .option("pass-option", value: "pass.key=value", "An option of a pass, e.g. specialize_sequence.sizes=1,16,64 (repeatable)."),
            .flag("list-passes", "List every pass and pipeline, then exit (no model needed).", standalone: true),
            .flag("print-ir-after-all", "Print the MIL after every pass (stderr)."),
            .flag("print-ir-after-change", "Print the MIL after every pass that changed it (stderr)."),
            .flag("time-passes", "Print how long each pass took (stderr)."),
            .flag("json", "Print op counts before/after and per-pass statistics as JSON."),
            .flag("force", "Replace -o even when it is not a package forge-ir recognises (a folder of other files)."),
        ]
    )

    static func run(_ args: ParsedArguments) throws -> Int32 {
        if args.flag("list-passes") {
            var out = "passes:\n"
            for p in PassRegistry.all { out += ArgumentParser.row(p.name, p.summary) }
            out += "\npipelines:\n"
            for n in Pipelines.names {
                out += ArgumentParser.row(n, (Pipelines.pipeline(named: n) ?? []).map { $0.name }.joined(separator: ", "))
            }
            Console.out(out)
            return ExitCode.ok
        }
        let input = args.positionals[0]
        guard let output = args.value("o") else {
            throw UsageError(message: "missing -o <out.mlpackage>")
        }
        guard output.hasSuffix(".mlpackage") || output.hasSuffix(".mlpackage/") else {
            throw UsageError(message: "-o \(output): the result is an ML Program package; name it <name>.mlpackage")
        }
        var listed: [Pass.Type] = []
        if let list = args.value("passes") {
            do {
                listed = try PassRegistry.passes(list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
            } catch {
                throw UsageError(message: "\(error)")
            }
        }
        let fix = args.flag("fix")
        var pipeline: [Pass.Type] = []
        let pipelineName = args.value("pipeline") ?? (fix ? "cleanup" : args.value("passes") != nil ? "empty" : "default")
        guard let p = Pipelines.pipeline(named: pipelineName) else {
            throw UsageError(message: "unknown pipeline '\(pipelineName)' (pipelines: \(Pipelines.names.joined(separator: ", ")))")
        }
        pipeline = p
        for o in args.values(of: "pass-option") {
            guard let eq = o.firstIndex(of: "="), PassOptions.known.contains(String(o[..<eq])) else {
                throw UsageError(message: "--pass-option takes <pass>.<key>=<value> (options: \(PassOptions.known.joined(separator: ", "))), got '\(o)'")
            }
            PassOptions.values[String(o[..<eq])] = String(o[o.index(after: eq)...])
        }
        try InputOverwriteCheck.refuse(output: output, sameAs: input)
        let model = try ModelLoader.load(path: input)
        var fixes: [Pass.Type] = []
        var fixedFor: [String: [String]] = [:]   // pass -> finding codes
        var diagnosed: Diagnosis?
        if fix {
            let d = Diagnoser.diagnose(model)
            diagnosed = d
            for name in FixPlan.passes(for: d) {
                guard let pass = PassRegistry.pass(named: name) else { continue }
                fixes.append(pass)
                fixedFor[name] = Array(Set(d.findings.filter { $0.fixPass == name }.map(\.code))).sorted()
            }
        }
        let passes = fixes + listed + pipeline
        let before = opCounts(model)
        var options = PassManager.Options()
        options.printIRAfterAll = args.flag("print-ir-after-all")
        options.printIRAfterChange = args.flag("print-ir-after-change")
        options.timePasses = args.flag("time-passes")
        let manager = PassManager(passes: passes, options: options)
        manager.log = { Console.err($0) }
        try manager.run(on: model)
        let replaced = try ModelWriter.writePackage(model, to: output, options: .init(force: args.flag("force")))
        if replaced { Console.err("replaced the existing package \(output)\n") }
        let after = opCounts(model)
        if args.flag("json") {
            var stats: [JSONValue] = []
            for r in manager.records {
                var s: [String: JSONValue] = [:]
                for (k, v) in r.result.statistics { s[k] = .int(v) }
                stats.append(.object(["pass": .string(r.name), "changed": .bool(r.result.changed),
                                      "seconds": .double(r.seconds), "statistics": .object(s)]))
            }
            let json = JSONValue.object([
                "input": .string(input), "output": .string(output),
                "op_counts_before": .object(before.mapValues { .int($0) }),
                "op_counts_after": .object(after.mapValues { .int($0) }),
                "passes": .array(stats),
            ])
            Console.out(json.render(pretty: true) + "\n")
        } else {
            if let diagnosed {
                Console.out(FixPlan.report(before: diagnosed, after: Diagnoser.diagnose(model), applied: fixes.map { $0.name }, fixedFor: fixedFor, manager: manager) + "\n")
            }
            Console.out(table(before: before, after: after))
            let stats = manager.statisticsReport()
            if !stats.isEmpty { Console.out("\n" + stats) }
            Console.out("\nwrote \(output)\n")
        }
        return ExitCode.ok
    }

    /// Op counts over every function, nested blocks included.
    static func opCounts(_ model: Model) -> [String: Int] {
        var counts: [String: Int] = [:]
        for f in model.program.functions { f.body.walk { counts[$0.type, default: 0] += 1 } }
        return counts
    }

    /// onnx-simplifier-style table: op type, count before, count after.
    static func table(before: [String: Int], after: [String: Int]) -> String {
        let ops = Set(before.keys).union(after.keys).sorted()
        let w = max(20, (ops.map(\.count).max() ?? 0) + 2)
        func row(_ a: String, _ b: String, _ c: String) -> String {
            a.padding(toLength: w, withPad: " ", startingAt: 0) + String(repeating: " ", count: max(0, 10 - b.count)) + b
                + String(repeating: " ", count: max(0, 10 - c.count)) + c + "\n"
        }
        var out = row("op", "before", "after")
        out += String(repeating: "-", count: w + 20) + "\n"
        for op in ops { out += row(op, String(before[op] ?? 0), String(after[op] ?? 0)) }
        out += String(repeating: "-", count: w + 20) + "\n"
        out += row("total", String(before.values.reduce(0, +)), String(after.values.reduce(0, +)))
        return out
    }
}
