import Foundation
import GraphIR
import JSON
import Passes

/// `forge-ir reduce MODEL --check 'CMD {model}' [-o OUT.mlpackage]`: Polygraphy's
/// `debug reduce` habit — bisect over op order to the shortest prefix of the function whose
/// extracted package still fails the check, then try the failing op alone.
enum ReduceCommand: Command {
    static let spec = CommandSpec(
        name: "reduce", reads: .model,
        about: """
        Bisect over op order to the smallest prefix/slice whose extracted package still fails a check command.

        Candidates: prefix k = the function's inputs → the outputs of its k-th op (constants not
        counted; ops without outputs skipped), extracted as with 'forge-ir extract'. The full
        model must fail the check; then a binary search finds the smallest failing k
        (⌈log2 N⌉ checks for N ops, assuming a prefix that contains the failing op fails), and
        the k-th op is tried alone (its inputs as model inputs). Progress on a terminal.
        """,
        options: [
            .option("check", value: "cmd {model}", "Shell command run on each candidate ({model} = its path); non-zero exit = still fails (required)."),
            .option("o", value: "out.mlpackage", "Write the smallest failing package here."),
            CommonOptions.function,
            .flag("show-check-output", "Let the check command's stdout/stderr through (default: discarded)."),
            CommonOptions.json,
        ]
    )

    struct Check { var label: String; var ops: Int; var failed: Bool }

    static func run(_ args: ParsedArguments) throws -> Int32 {
                guard let check = args.value("check"), check.contains("{model}") else {
            throw UsageError(message: "--check 'CMD {model}' is required and must contain {model}")
        }
        let path = args.positionals[0]
        if let out = args.value("o") { try InputOverwriteCheck.refuse(output: out, sameAs: path) }
        let function = args.value("function")
        let probe = try ModelLoader.load(path: path)
        guard let f = probe.program.function(named: function ?? probe.defaultFunctionName) else {
            throw ReduceCLIError("no function '\(function ?? probe.defaultFunctionName)' in \(path)")
        }
        // Candidate ends: top-level ops with tensor outputs, constants aside.
        let order: [(name: String, type: String, outputs: [String])] = f.body.operations.compactMap { op in
            guard op.type != "const", !op.type.hasPrefix("constexpr_") else { return nil }
            let outs = op.outputs.filter { $0.type.tensorType != nil }.map(\.name)
            return outs.isEmpty ? nil : (op.name, op.type, outs)
        }
        guard !order.isEmpty else { throw ReduceCLIError("function '\(f.name)' has no op to reduce over") }
        let work = NSTemporaryDirectory() + "forge-ir-reduce-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }
        let progress = ProgressLine()
        var checks: [Check] = []
        var count = 0

        /// Writes the candidate and runs the check; true when it still fails.
        func fails(from: [String], to: [String], label: String) throws -> (Bool, String) {
            count += 1
            progress.show("reduce: check \(count) (\(label))")
            let model = try ModelLoader.load(path: path)
            let sub = try SubgraphExtraction.extract(model, function: function, from: from, to: to)
            let candidate = work + "/candidate-\(count).mlpackage"
            try ModelWriter.writePackage(sub, to: candidate)
            let status = try shell(check.replacingOccurrences(of: "{model}", with: quote(candidate)), quiet: !args.flag("show-check-output"))
            var n = 0
            sub.program.functions[0].body.walk { if $0.type != "const" { _ = $0; n += 1 } }
            checks.append(Check(label: label, ops: n, failed: status != 0))
            return (status != 0, candidate)
        }

        let whole = try shell(check.replacingOccurrences(of: "{model}", with: quote(path)), quiet: !args.flag("show-check-output"))
        count += 1
        checks.append(Check(label: "the whole model", ops: order.count, failed: whole != 0))
        guard whole != 0 else {
            progress.clear()
            throw ReduceCLIError("the check passes on the whole model (\(path)); nothing to reduce")
        }
        // Smallest k in 1...N with prefix(k) failing; prefix(N) is the whole model's outputs up to the last op.
        var lo = 1, hi = order.count
        var best: String?
        while lo < hi {
            let mid = (lo + hi) / 2
            let (bad, file) = try fails(from: [], to: order[mid - 1].outputs, label: "prefix of \(mid) ops, to '\(order[mid - 1].name)'")
            if bad { hi = mid; best = file } else { lo = mid + 1 }
        }
        let culprit = order[lo - 1]
        if best == nil || !checks.contains(where: { $0.failed && $0.label.hasSuffix("to '\(culprit.name)'") }) {
            let (bad, file) = try fails(from: [], to: culprit.outputs, label: "prefix of \(lo) ops, to '\(culprit.name)'")
            if bad { best = file }
        }
        // The culprit alone: its non-constant operands become inputs.
        let fresh = try ModelLoader.load(path: path)
        var operands: [String] = []
        if let ff = fresh.program.function(named: f.name), let op = ff.body.operations.first(where: { $0.name == culprit.name }) {
            for v in op.operandValues where !v.type.isState && v.producer.map({ $0.type != "const" && !$0.type.hasPrefix("constexpr_") }) ?? false {
                if !operands.contains(v.name) { operands.append(v.name) }
            }
        }
        var alone = false
        if !operands.isEmpty {
            let (bad, file) = try fails(from: operands, to: culprit.outputs, label: "'\(culprit.name)' alone")
            if bad { best = file; alone = true }
        }
        progress.clear()
        if let out = args.value("o"), let best {
            let m = try ModelLoader.load(path: best)
            try ModelWriter.writePackage(m, to: out)
        }
        let summary = "first failing op: \(culprit.type) '\(culprit.name)' (op \(lo) of \(order.count)); \(alone ? "it fails alone" : "it does not fail alone: the smallest failing model is the prefix of \(lo) ops"); \(count) checks"
        if args.flag("json") {
            let json = JSONValue.object([
                "model": .string(path), "ops": .int(order.count),
                "op": .object(["name": .string(culprit.name), "type": .string(culprit.type), "index": .int(lo - 1)]),
                "fails_alone": .bool(alone), "checks_run": .int(count), "output": args.value("o").map { .string($0) } ?? .null,
                "checks": .array(checks.map { .object(["candidate": .string($0.label), "ops": .int($0.ops), "failed": .bool($0.failed)]) }),
            ])
            Console.out(json.render(pretty: true) + "\n")
        } else {
            for (i, c) in checks.enumerated() { Console.out("check \(i + 1): \(c.label): \(c.failed ? "fails" : "passes")\n") }
            Console.out(summary + "\n")
        }
        return ExitCode.ok
    }

    static func quote(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'" }

    /// Runs `command` with /bin/sh -c; returns its exit status.
    static func shell(_ command: String, quiet: Bool) throws -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", command]
        if quiet {
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
        } else {
            p.standardOutput = FileHandle.standardError
        }
        do { try p.run() } catch { throw ReduceCLIError("cannot run the check command: \(error.localizedDescription)") }
        p.waitUntilExit()
        return p.terminationStatus
    }
}

struct ReduceCLIError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}
