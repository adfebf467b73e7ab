import Comparison
import Foundation
import Generation
import GraphIR
import Interpreter
import JSON

/// `forge-ir run MODEL [--inputs F.npz] [--input NAME=F.npy]… [--out DIR] [--state-in DIR]
/// [--state-out DIR] [--static-input NAME=FILE]… [--function NAME] [--precision fp32|fp16] [--activations fp32|int16|int8] [--repeat N] [--json]`
enum RunCommand: Command {
    static let spec = CommandSpec(
        name: "run", reads: .model,
        about: """
        Run a function on CPU with .npy/.npz inputs; write outputs and states as .npy.

        Flexible dimensions are taken from the given arrays and checked against the model's
        RangeDim bounds or EnumeratedShapes. Without --out, a short line per output is printed.

        --outputs writes the values as the interpreter holds them (fp16-typed values as <f4 in
        fp32 precision, <f2 in fp16 precision); file names are the value names, characters
        outside A-Z a-z 0-9 . _ - replaced by _ plus a hash (values.json maps names to files).
        When the budget is spent the remaining values are not written and run fails (exit 1)
        naming the first value left out. The package is never changed.

        With --repeat N the function runs N + 1 times (the first untimed), states restored to
        their starting values (--state-in, else zeros) before every call; the outputs and states
        written are those of the last call, and the time reported is the median of the N
        (`seconds`; `--json` adds `repeat`, `seconds_samples`, `seconds_min`, `threads`).
        """,
        options: [
            CommonOptions.function,
            .option("inputs", value: "file.npz", "Arrays named after the model's inputs."),
            .option("input", value: "name=file.npy", "One input (repeatable; overrides --inputs)."),
            StaticInputOption.option,
            .option("out", value: "dir", "Write one <output_name>.npy per output."),
            .option("state-in", value: "dir", "Load states from <dir>/<state>.npy (default: zeros)."),
            .option("state-out", value: "dir", "Save states after the call to <dir>/<state>.npy."),
            .int("repeat", "Time n calls after one untimed warm-up call, each from the same states; report the median (default: one timed call).", range: 1...1_000_000),
            .option("outputs", value: "name,…|all", "Also save these op outputs (names as in dump; all = every non-constant op) as .npy in --out, with values.json."),
            .option("max-output-bytes", value: "n", "Budget for the .npy bytes --outputs writes (default 1073741824 = 1 GiB; suffixes K, M, G)."),
            .option("save-inputs", value: "dir", "Write the inputs of the call as <input>.npy (+ values.json) for a golden folder."),
            .flag("json", "Print output names, shapes, dtypes, checksums and the time as JSON."),
            .flag("profile", "Print time per op type over the timed calls, and the share outside the kernels (stderr)."),
            .flag("allow-lossy-inputs", "Convert inputs and states that lose values (int64 beyond int32, fp32 data for an fp16 state…) with a warning instead of refusing them."),
        ],
        groups: [.kernels]
    )

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let path = args.positionals[0]
        let precision = args.precision
        let singles = try singleInputs(args)
        try refuseFileAsFolder(args, ["out", "state-out"])
        let observed = try observedValues(args)
        if observed != .none && args.value("out") == nil {
            throw UsageError(message: "--outputs needs --out DIR (where the .npy files go)")
        }
        let maxBytes = try byteCount(args.value("max-output-bytes") ?? "1G", option: "max-output-bytes")
        let model = try ModelLoader.load(path: path)
        let session = try Session(model: model, function: args.value("function"), precision: precision, observing: observed,
                                  activations: try args.activations())
        ActivationNote.print(session.plan.activations, precision: precision, functions: [session.function])
        try StaticInputOption.bind(args, plan: session.plan)
        let inputs = try readInputs(args, singles: singles, session: session)
        try checkObserved(observed, in: session)
        if let dir = args.value("save-inputs") {
            let w = try ValueFiles.Writer(directory: dir, maxBytes: Int.max, function: nil, widenHalf: false)
            for v in session.function.inputs where !v.type.isState { if let t = inputs[v.name] { w.write(v.name, t) } }
            try w.finish(model: path, function: session.function.name, precision: precision.rawValue)
        }
        try loadStates(args, session)
        var writer: ValueFiles.Writer?
        if observed != .none, let dir = args.value("out") {
            let w = try ValueFiles.Writer(directory: dir, maxBytes: maxBytes, function: session.function, widenHalf: precision == .fp32)
            session.plan.valueObserver = { name, t in w.write(name, t) }
            writer = w
        }
        let repeats = args.int("repeat", default: 0)
        let (outputs, samples) = try timedCalls(args, session: session, inputs: inputs, repeats: repeats)
        session.plan.valueObserver = nil
        if args.flag("profile") {
            Console.err(session.plan.profileReport())
            session.plan.profile = nil
        }
        if let dir = args.value("out") {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            for (name, t) in outputs { try NPY.write(t, path: dir + "/" + ValueFiles.fileName(for: name)) }
        }
        if let w = writer {
            try w.finish(model: path, function: session.function.name, precision: precision.rawValue)
            if let first = w.firstSkipped {
                throw RunCLIError("--outputs: the values reach the --max-output-bytes budget of \(maxBytes) bytes: \(w.entries.count) written (\(w.bytes) bytes) to \(w.directory), \(w.skipped) left out from '\(first)' on; raise --max-output-bytes or name the values wanted")
            }
            Console.err("wrote \(w.entries.count) values (\(w.bytes) bytes) to \(w.directory)\n")
        }
        if let dir = args.value("state-out") { try session.states.save(to: dir) }
        report(args, session: session, outputs: outputs, samples: samples, repeats: repeats)
        return ExitCode.ok
    }

    /// `--input NAME=FILE.npy`, repeatable.
    static func singleInputs(_ args: ParsedArguments) throws -> [(name: String, file: String)] {
        try args.values(of: "input").map { item in
            guard let eq = item.firstIndex(of: "="), eq != item.startIndex else {
                throw UsageError(message: "--input takes NAME=FILE.npy, got '\(item)'")
            }
            return (String(item[..<eq]), String(item[item.index(after: eq)...]))
        }
    }

    static func refuseFileAsFolder(_ args: ParsedArguments, _ options: [String]) throws {
        for option in options {
            var isDir: ObjCBool = false
            if let dir = args.value(option), FileManager.default.fileExists(atPath: dir, isDirectory: &isDir), !isDir.boolValue {
                throw UsageError(message: "--\(option) \(dir) is a file; give a folder (created if missing)")
            }
        }
    }

    static func lossyWarning(_ message: String) { Console.err("\(ArgumentParser.toolName): warning: \(message)\n") }

    /// `--inputs` then `--input`, read knowing the dtypes they feed, so they convert as Core ML
    /// converts them.
    static func readInputs(_ args: ParsedArguments, singles: [(name: String, file: String)], session: Session) throws -> [String: Tensor] {
        let allowLossy = args.flag("allow-lossy-inputs")
        var targets: [String: DType] = [:]
        for v in session.function.inputs { if let t = v.type.tensorType { targets[v.name] = t.dtype } }
        var inputs: [String: Tensor] = [:]
        if let npz = args.value("inputs") { inputs = try NPZ.read(path: npz, targets: targets, allowLossy: allowLossy, warn: lossyWarning) }
        for (name, file) in singles {
            inputs[name] = try NPY.read(path: file, target: targets[name], allowLossy: allowLossy, warn: lossyWarning)
        }
        return inputs
    }

    /// `--outputs a,b`: every name must be an op output of the function.
    static func checkObserved(_ observed: ObservedValues, in session: Session) throws {
        guard case let .values(names) = observed else { return }
        var known = Set<String>()
        session.function.body.walk { op in for v in op.outputs { known.insert(v.name) } }
        let unknown = names.subtracting(known).sorted()
        if !unknown.isEmpty {
            throw RunCLIError("--outputs: no op output named \(unknown.prefix(5).map { "'\($0)'" }.joined(separator: ", ")) in function '\(session.function.name)' (value names, left of '=' in 'forge-ir dump')")
        }
    }

    /// `--state-in DIR`, else zeros.
    static func loadStates(_ args: ParsedArguments, _ session: Session) throws {
        if let dir = args.value("state-in") {
            try session.states.load(from: dir, allowLossy: args.flag("allow-lossy-inputs"), warn: lossyWarning)
        } else {
            session.states.reset()
        }
    }

    /// One call, or `repeats` timed calls after an untimed one, each from the starting states.
    static func timedCalls(_ args: ParsedArguments, session: Session, inputs: [String: Tensor], repeats: Int) throws
        -> (outputs: [String: Tensor], seconds: [Double]) {
        var samples: [Double] = []
        var outputs: [String: Tensor] = [:]
        for call in 0...repeats {
            // The profile covers the timed calls only (the warm-up evaluates the constants).
            if args.flag("profile") && (repeats == 0 || call == 1) { session.plan.profile = [:] }
            if call > 0 { try loadStates(args, session) }
            let start = DispatchTime.now().uptimeNanoseconds
            outputs = try session.predict(inputs)
            let dt = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            if repeats == 0 || call > 0 { samples.append(dt) }
        }
        return (outputs, samples)
    }

    /// The outputs' names, dtypes, shapes and checksums, and the (median) time: text or `--json`.
    static func report(_ args: ParsedArguments, session: Session, outputs: [String: Tensor], samples: [Double], repeats: Int) {
        let precision = args.precision
        let sorted = samples.sorted()
        let seconds = sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
        let names = session.function.outputs.map(\.name)
        let labels = ClassifierLabels.of(session.function)
        if args.flag("json") {
            var outs: [JSONValue] = []
            for n in names {
                let t = outputs[n]!
                var o: [String: JSONValue] = [
                    "name": .string(n), "dtype": .string(t.dtype.rawValue),
                    "shape": .array(t.shape.map { .int($0) }),
                    "checksum": .double(checksum(t)),
                ]
                if case let .string(s) = t.data { o["value"] = s.count == 1 && t.shape.isEmpty ? .string(s[0]) : .array(s.map { .string($0) }) }
                if let keys = labels[n] { o["classes"] = .array(keys.map { .string($0) }) }
                outs.append(.object(o))
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
                obj["threads"] = .int(KernelISA.threads)
            }
            Console.out(JSONValue.object(obj).render(pretty: true) + "\n")
        } else {
            for n in names { Console.out(outputLine(n, outputs[n]!, classes: labels[n]) + "\n") }
            Console.err(String(format: "ran '%@' in %.3f s%@ (%@)\n", session.function.name, seconds,
                               repeats > 0 ? " (median of \(repeats) after a warm-up)" : "", precision.rawValue))
        }
    }

    /// One output for the text report: dtype, shape and checksum; a string output's text; a
    /// classifier's dictionary (values in class order) with its three largest classes.
    static func outputLine(_ name: String, _ t: Tensor, classes: [String]?) -> String {
        if case let .string(s) = t.data {
            return "\(name): string \(t.shape) = " + s.prefix(8).map { "\"\($0)\"" }.joined(separator: ", ") + (s.count > 8 ? ", …" : "")
        }
        guard let keys = classes, keys.count == t.count else { return "\(name): \(t.dtype.rawValue) \(t.shape) checksum \(checksum(t))" }
        let v = t.floats
        let top = v.indices.sorted { v[$0] != v[$1] ? v[$0] > v[$1] : $0 < $1 }.prefix(3)
        return "\(name): dictionary of \(keys.count) classes (values \(t.dtype.rawValue) \(t.shape) in class order, checksum \(checksum(t))); top: "
            + top.map { "\(keys[$0]) \(v[$0])" }.joined(separator: ", ")
    }

    /// `--outputs a,b` / `all`.
    static func observedValues(_ args: ParsedArguments) throws -> ObservedValues {
        guard let text = args.value("outputs") else { return .none }
        if text == "all" { return .all }
        let names = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !names.isEmpty else { throw UsageError(message: "--outputs takes NAME[,NAME…] or all") }
        return .values(Set(names))
    }

    /// `123`, `64K`, `512M`, `2G` (powers of 1024).
    static func byteCount(_ text: String, option: String) throws -> Int {
        var t = text.uppercased()
        var mult = 1
        if let last = t.last, let m = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30][String(last)] { mult = m; t.removeLast() }
        guard let n = Int(t), n >= 0, n <= Int.max / mult else {
            throw UsageError(message: "--\(option) takes a byte count (e.g. 1048576, 512M, 2G), not '\(text)'")
        }
        return n * mult
    }

    /// Sum of the values as Double (NaN/inf propagate): a quick fingerprint of an output.
    static func checksum(_ t: Tensor) -> Double {
        t.floats.reduce(0.0) { $0 + Double($1) }
    }
}


struct RunCLIError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}
