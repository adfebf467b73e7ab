import Foundation
import GraphIR
import Interpreter
import Generation

/// `forge-ir run MODEL [--inputs F.npz] [--input NAME=F.npy]… [--out DIR] [--state-in DIR]
/// [--state-out DIR] [--function NAME] [--precision fp32|fp16] [--json]`
enum RunCommand: Command {
    static let spec = CommandSpec(
        name: "run",
        summary: "Run a function on CPU with .npy/.npz inputs; write outputs and states as .npy.",
        positionals: [PositionalSpec(name: "model", help: ".mlpackage or .mlmodelc folder, or .mlmodel file (ML Program).")],
        options: [
            CommonOptions.function,
            .option("inputs", value: "file.npz", "Arrays named after the model's inputs."),
            .option("input", value: "name=file.npy", "One input (repeatable; overrides --inputs)."),
            .option("out", value: "dir", "Write one <output_name>.npy per output."),
            .option("state-in", value: "dir", "Load states from <dir>/<state>.npy (default: zeros)."),
            .option("state-out", value: "dir", "Save states after the call to <dir>/<state>.npy."),
            CommonOptions.precision,
            CommonOptions.threads,
            .flag("json", "Print output names, shapes, dtypes, checksums and the time as JSON."),
            .flag("allow-lossy-inputs", "Convert inputs and states that lose values (int64 beyond int32, fp32 data for an fp16 state…) with a warning instead of refusing them."),
            CommonOptions.maxMemory,
        ],
        discussion: """
        Flexible dimensions are taken from the given arrays and checked against the model's
        RangeDim bounds or EnumeratedShapes. Without --out, a short line per output is printed.
        """
    )

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let path = args.positionals[0]
        let precision = args.precision
        var singles: [(name: String, file: String)] = []
        for item in args.values(of: "input") {
            guard let eq = item.firstIndex(of: "="), eq != item.startIndex else {
                throw UsageError(message: "--input takes NAME=FILE.npy, got '\(item)'")
            }
            singles.append((String(item[..<eq]), String(item[item.index(after: eq)...])))
        }
        for option in ["out", "state-out"] {
            var isDir: ObjCBool = false
            if let dir = args.value(option), FileManager.default.fileExists(atPath: dir, isDirectory: &isDir), !isDir.boolValue {
                throw UsageError(message: "--\(option) \(dir) is a file; give a folder (created if missing)")
            }
        }
        let model = try ModelLoader.load(path: path)
        let session = try Session(model: model, function: args.value("function"), precision: precision)
        // Inputs are read knowing the dtypes they feed, so they convert as Core ML converts them.
        let allowLossy = args.flag("allow-lossy-inputs")
        let warn: (String) -> Void = { Console.err("\(ArgumentParser.toolName): warning: \($0)\n") }
        var targets: [String: DType] = [:]
        for v in session.function.inputs { if let t = v.type.tensorType { targets[v.name] = t.dtype } }
        var inputs: [String: Tensor] = [:]
        if let npz = args.value("inputs") { inputs = try NPZ.read(path: npz, targets: targets, allowLossy: allowLossy, warn: warn) }
        for (name, file) in singles {
            inputs[name] = try NPY.read(path: file, target: targets[name], allowLossy: allowLossy, warn: warn)
        }
        if let dir = args.value("state-in") { try session.states.load(from: dir, allowLossy: allowLossy, warn: warn) }
        let start = DispatchTime.now().uptimeNanoseconds
        let outputs = try session.predict(inputs)
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
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
            let json = JSONValue.object([
                "function": .string(session.function.name),
                "precision": .string(precision.rawValue),
                "outputs": .array(outs),
                "seconds": .double(seconds),
            ])
            Console.out(json.render(pretty: true) + "\n")
        } else {
            for n in names {
                let t = outputs[n]!
                Console.out("\(n): \(t.dtype.rawValue) \(t.shape) checksum \(checksum(t))\n")
            }
            Console.err(String(format: "ran '%@' in %.3f s (%@)\n", session.function.name, seconds, precision.rawValue))
        }
        return ExitCode.ok
    }

    /// Sum of the values as Double (NaN/inf propagate): a quick fingerprint of an output.
    static func checksum(_ t: Tensor) -> Double {
        t.floats.reduce(0.0) { $0 + Double($1) }
    }
}
