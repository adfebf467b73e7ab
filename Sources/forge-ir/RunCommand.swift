import Foundation
import GraphIR
import Interpreter
import Generation

/// `forge-ir run MODEL [--inputs F.npz] [--input NAME=F.npy]… [--out DIR] [--state-in DIR]
/// [--state-out DIR] [--function NAME] [--precision fp32|fp16] [--int8-activations] [--repeat N] [--json]`
enum RunCommand: Command {
    static let spec = CommandSpec(
        name: "run",
        summary: "Run a function on CPU with .npy/.npz inputs; write outputs and states as .npy.",
        positionals: [PositionalSpec(name: "model", help: ".mlpackage folder or .mlmodel file (ML Program).")],
        options: [
            CommonOptions.function,
            .option("inputs", value: "file.npz", "Arrays named after the model's inputs."),
            .option("input", value: "name=file.npy", "One input (repeatable; overrides --inputs)."),
            .option("out", value: "dir", "Write one <output_name>.npy per output."),
            .option("state-in", value: "dir", "Load states from <dir>/<state>.npy (default: zeros)."),
            .option("state-out", value: "dir", "Save states after the call to <dir>/<state>.npy."),
            CommonOptions.precision,
            CommonOptions.threads,
            CommonOptions.int8Activations,
            .int("repeat", "Time n calls after one untimed warm-up call, each from the same states; report the median (default: one timed call).", range: 1...1_000_000),
            .flag("json", "Print output names, shapes, dtypes, checksums and the time as JSON."),
        ],
        discussion: """
        Flexible dimensions are taken from the given arrays and checked against the model's
        RangeDim bounds or EnumeratedShapes. Without --out, a short line per output is printed.
        With --repeat N the function runs N + 1 times (the first untimed), states restored to
        their starting values (--state-in, else zeros) before every call; the outputs and states
        written are those of the last call, and the time reported is the median of the N
        (`seconds`; `--json` adds `repeat`, `seconds_samples`, `seconds_min`, `threads`).
        """
    )

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let path = args.positionals[0]
        let precision = args.precision
        let repeats = args.int("repeat", default: 0)
        var inputs: [String: Tensor] = [:]
        if let npz = args.value("inputs") { inputs = try NPZ.read(path: npz) }
        for item in args.values(of: "input") {
            guard let eq = item.firstIndex(of: "="), eq != item.startIndex else {
                throw UsageError(message: "--input takes NAME=FILE.npy, got '\(item)'")
            }
            inputs[String(item[..<eq])] = try NPY.read(path: String(item[item.index(after: eq)...]))
        }
        for option in ["out", "state-out"] {
            var isDir: ObjCBool = false
            if let dir = args.value(option), FileManager.default.fileExists(atPath: dir, isDirectory: &isDir), !isDir.boolValue {
                throw UsageError(message: "--\(option) \(dir) is a file; give a folder (created if missing)")
            }
        }
        let model = try ModelLoader.load(path: path)
        let session = try Session(model: model, function: args.value("function"), precision: precision,
                                  int8Activations: args.flag("int8-activations"))
        if let dir = args.value("state-in") { try session.states.load(from: dir) }
        var samples: [Double] = []
        var outputs: [String: Tensor] = [:]
        for call in 0...repeats {
            if call > 0 {
                if let dir = args.value("state-in") { try session.states.load(from: dir) } else { session.states.reset() }
            }
            let start = DispatchTime.now().uptimeNanoseconds
            outputs = try session.predict(inputs)
            let dt = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            if repeats == 0 || call > 0 { samples.append(dt) }
        }
        let sorted = samples.sorted()
        let seconds = sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
        if let dir = args.value("out") {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            for (name, t) in outputs { try NPY.write(t, path: dir + "/" + name + ".npy") }
        }
        if let dir = args.value("state-out") { try session.states.save(to: dir) }
        let names = session.function.outputs.map(\.name)
        if args.flag("json") {
            var outs: [JSONValue] = []
            for n in names {
                let t = outputs[n]!
                outs.append(.object([
                    "name": .string(n), "dtype": .string(t.dtype.rawValue),
                    "shape": .array(t.shape.map { .int($0) }),
                    "checksum": .double(checksum(t)),
                ]))
            }
            var obj: [String: JSONValue] = [
                "function": .string(session.function.name),
                "precision": .string(precision.rawValue),
                "outputs": .array(outs),
                "seconds": .double(seconds),
            ]
            if repeats > 0 {
                obj["repeat"] = .int(repeats)
                obj["seconds_samples"] = .array(samples.map { .double($0) })
                obj["seconds_min"] = .double(sorted[0])
                obj["threads"] = .int(Int(KernelISA.threads))
            }
            let json = JSONValue.object(obj)
            Console.out(json.render(pretty: true) + "\n")
        } else {
            for n in names {
                let t = outputs[n]!
                Console.out("\(n): \(t.dtype.rawValue) \(t.shape) checksum \(checksum(t))\n")
            }
            Console.err(String(format: "ran '%@' in %.3f s%@ (%@)\n", session.function.name, seconds,
                               repeats > 0 ? " (median of \(repeats) after a warm-up)" : "", precision.rawValue))
        }
        return ExitCode.ok
    }

    /// Sum of the values as Double (NaN/inf propagate): a quick fingerprint of an output.
    static func checksum(_ t: Tensor) -> Double {
        t.floats.reduce(0.0) { $0 + Double($1) }
    }
}
