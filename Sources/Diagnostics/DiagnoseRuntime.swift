import Foundation
import GraphIR
import Interpreter
import Passes
import Generation

/// The runtime part of `forge-ir diagnose` (`--precision fp16`, `--dynamic`): builds the calls
/// from `--inputs` or from the generation contract (Generation's `GenerationContract`, detected
/// or `--contract`) and runs `RuntimeChecks`.
public enum DiagnoseRuntime {
    public struct Request {
        public var fp16 = false
        public var dynamic = false
        public var inputs: [String: Tensor]?
        public var inputsPath: String?
        public var promptIDs: [Int32]?
        /// `--contract FILE.json`, applied to the functions it drives.
        public var contract: GenerationContract?
        /// Constant table inputs bound to every run (`--static-input`, the contract's files).
        public var staticInputs: [String: MappedArray] = [:]
        public init(fp16: Bool = false, dynamic: Bool = false, inputs: [String: Tensor]? = nil,
                    inputsPath: String? = nil, promptIDs: [Int32]? = nil, contract: GenerationContract? = nil) {
            self.contract = contract
            self.fp16 = fp16
            self.dynamic = dynamic
            self.inputs = inputs
            self.inputsPath = inputsPath
            self.promptIDs = promptIDs
        }
    }

    /// Default prompt length of the generated calls.
    public static let defaultLength = 16

    /// Deterministic token ids in 0..<vocab (SplitMix64).
    public static func randomIDs(_ n: Int, vocab: Int, seed: UInt64 = 0) -> [Int32] {
        var g = SplitMix64(seed: seed)
        return (0..<n).map { _ in Int32(g.next() % UInt64(max(vocab, 1))) }
    }

    /// Runs the requested checks on `functions` of `model` and adds them to `d`.
    public static func run(_ r: Request, model: Model, functions: [String], into d: inout Diagnosis) throws {
        for name in functions {
            guard let f = model.program.function(named: name) else { continue }
            let seqSymbol = d.functions.first { $0.name == name }?.sequenceSymbol
            func binding(_ s: Int) -> [String: Int]? { seqSymbol.map { [$0: s] } }
            var contract: GenerationContract?
            var contractError: Error?
            if let given = r.contract, given.functions.names.contains(name) {
                // The file's roles on this function (a pair's prefill runs with its own width).
                var c = given
                if let ids = f.inputs.first(where: { $0.name == c.tokenIDs })?.type.tensorType {
                    c.functions = .single(name, GenerationContract.width(of: ids, context: c.contextLength))
                }
                contract = c
            } else {
                do { contract = try GenerationContract.detect(function: f) } catch { contractError = error }
            }
            // Static inputs must be bound (--static-input); a provider's per-token input is not generated.
            let unfed = (contract?.staticInputs ?? []).filter { r.staticInputs[$0] == nil }
            if r.inputs == nil, !unfed.isEmpty {
                contract = nil
                contractError = DiagnoseRequestError("function '\(name)' also takes \(unfed.map { "'\($0)'" }.joined(separator: ", ")), which diagnose cannot generate; bind \(unfed.count == 1 ? "it" : "them") with --static-input NAME=FILE")
            } else if r.inputs == nil, let p = contract?.provider {
                contract = nil
                contractError = DiagnoseRequestError("function '\(name)': diagnose does not generate the provider input '\(p.input)'; give --inputs F.npz")
            }
            let bound = r.staticInputs.filter { kv in f.inputs.contains { $0.name == kv.key } }
            var carry: [String: String] = [:]
            if let c = contract, case let .explicit(pairs) = c.kv { for p in pairs { carry[p.output] = p.input } }
            func call(_ c: GenerationContract, _ ids: [Int32], _ position: Int) throws -> [String: Tensor] {
                try c.inputs(ids: ids, position: position, function: f)
            }
            // The token ids and the length N of the generated calls.
            var ids: [Int32] = []
            var idsLabel = ""
            if let c = contract {
                let width = c.prefill.width
                let widest = width.widest
                let vocabulary = f.outputs.first { $0.name == c.logits }?.type.tensorType?.shape.last?.fixedValue
                if let given = r.promptIDs {
                    if let vocab = vocabulary, let bad = given.first(where: { Int($0) >= vocab }) {
                        throw DiagnoseRequestError("--prompt-ids: token id \(bad) is outside the vocabulary of function '\(name)' (0..<\(vocab), from its \(c.logits) output)")
                    }
                    ids = given
                    idsLabel = "\(given.count) given token id\(given.count == 1 ? "" : "s")"
                } else {
                    var n = min(defaultLength, widest, c.contextLength)
                    if case let .enumerated(sizes) = width { n = sizes.filter { $0 <= defaultLength }.max() ?? sizes.min() ?? 1 }
                    if case let .range(lo, _) = width { n = max(n, lo) }
                    ids = randomIDs(n, vocab: vocabulary ?? 32000)
                    idsLabel = "\(n) random token id\(n == 1 ? "" : "s") (seed 0)"
                }
            }

            if r.fp16 {
                let scenario: RuntimeScenario
                var b: [String: Int]?
                if let inputs = r.inputs {
                    // Image inputs take their pixels too (as `run` does).
                    let converted = try ImageInput.convert(inputs, description: model.description.interface(of: f.name), function: f)
                    scenario = RuntimeScenario(calls: [converted], label: "inputs from \(r.inputsPath ?? "--inputs")", bound: bound)
                    if let s = seqSymbol, let ids = inputs[contract?.tokenIDs ?? "input_ids"] ?? inputs["input_ids"] ?? inputs["tokens"], ids.rank == 2 { b = [s: ids.shape[1]] }
                } else if let c = contract {
                    guard c.prefill.width.admits(ids.count) else {
                        throw DiagnoseRequestError("function '\(name)': a call of \(ids.count) tokens does not fit its \(c.tokenIDs) (\(c.prefill.width)); give fewer --prompt-ids")
                    }
                    scenario = RuntimeScenario(calls: [try call(c, ids, 0)], label: "prefill of \(idsLabel)", bound: bound)
                    b = binding(ids.count)
                } else {
                    throw DiagnoseRequestError("--precision fp16: function '\(name)' needs --inputs F.npz (\(contractError.map { "\($0)" } ?? "no generated inputs"))")
                }
                let (run, findings) = try RuntimeChecks.fp16Overflow(function: f, scenario: scenario, binding: b)
                d.add(run, findings: findings)
            }

            if r.dynamic {
                guard let c = contract else {
                    // Reported as a skipped check (the static findings still print, --json included).
                    d.add(RuntimeRun(check: "s1_mismatch", function: name, precision: "fp32", inputs: "", ok: true,
                                     summary: "skipped: \(contractError.map { "\($0)" } ?? "function '\(name)' fits no generation contract")"),
                          findings: [])
                    continue
                }
                if c.kv == .none {
                    // No cache to carry: a call at S = 1 is the first token alone, which the
                    // split/whole comparison (a decode call after a prefill) does not describe.
                    d.add(RuntimeRun(check: "s1_mismatch", function: name, precision: "fp32", inputs: idsLabel, ok: true,
                                     summary: "skipped: no KV cache (every call recomputes the whole sequence, so there is no S = 1 decode call to compare)"),
                          findings: [])
                    continue
                }
                let n = ids.count
                let width = c.prefill.width
                guard n >= 2, width.admits(1), width.admits(n) else {
                    let why: String
                    if case let .fixed(w) = width { why = "\(c.tokenIDs) takes exactly \(w) token\(w == 1 ? "" : "s") per call" } else if n < 2 {
                        why = "needs at least 2 tokens"
                    } else { why = "needs calls of 1 and of \(n) tokens; \(c.tokenIDs) allows \(width)" }
                    d.add(RuntimeRun(check: "s1_mismatch", function: name, precision: "fp32", inputs: idsLabel, ok: true,
                                     summary: "skipped: \(why)"), findings: [])
                    continue
                }
                let head = Array(ids.dropLast())
                let prefill: [[String: Tensor]] = width.admits(head.count)
                    ? [try call(c, head, 0)]
                    : try head.enumerated().map { try call(c, [$0.element], $0.offset) }
                let split = RuntimeScenario(calls: prefill + [try call(c, [ids[n - 1]], n - 1)],
                                            label: "prefill of \(n - 1)\(prefill.count > 1 ? " one by one" : ""), then 1 token at offset \(n - 1)",
                                            carry: carry, bound: bound)
                let whole = RuntimeScenario(calls: [try call(c, ids, 0)], label: "one call of \(idsLabel)", carry: carry, bound: bound)
                let (run, findings) = try RuntimeChecks.sequenceConsistency(function: f, split: split, whole: whole,
                                                                            output: c.logits, binding: binding(1))
                d.add(run, findings: findings)
            }
        }
    }
}

/// A run-time check that cannot be carried out as requested (bad `--prompt-ids`, inputs the
/// check cannot generate, a function that does not exist): the message names the option or
/// function.
public struct DiagnoseRequestError: Error, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { description = d }
}
