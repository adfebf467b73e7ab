import Dispatch
import GraphIR

/// Runs passes in order with instrumentation (MLIR's `--print-ir-after-all`,
/// `--print-ir-after-change`, `--time-passes`; per-pass statistics) and, optionally, the
/// verifier after every pass.
public final class PassManager {
    public struct Options {
        public var printIRAfterAll = false
        public var printIRAfterChange = false
        public var timePasses = false
        /// Run ``Verifier`` after every pass (tests always do).
        public var verifyEach = true
        public init() {}
    }

    /// One pass's record.
    public struct Record {
        public var name: String
        public var seconds: Double
        public var result: PassResult
    }

    public let passes: [Pass.Type]
    public var options: Options
    /// Where instrumentation text goes (default: nowhere). The CLI sends it to stderr.
    public var log: (String) -> Void = { _ in }
    public private(set) var records: [Record] = []

    public init(passes: [Pass.Type], options: Options = Options()) {
        self.passes = passes
        self.options = options
    }

    /// Runs every pass on `model`.
    /// - Throws: a pass's error, or `ModelError.invalidProgram` from the verifier naming the pass.
    public func run(on model: Model) throws {
        records = []
        for p in passes {
            let start = DispatchTime.now().uptimeNanoseconds
            let result = try p.init().run(on: model)
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            records.append(Record(name: p.name, seconds: seconds, result: result))
            if options.verifyEach {
                do { try Verifier.verify(model) } catch let e as ModelError {
                    throw PassError(pass: p.name, "left an invalid program: \(e)")
                }
            }
            if options.printIRAfterAll || (options.printIRAfterChange && result.changed) {
                log("// ----- IR after \(p.name)\(result.changed ? "" : " (unchanged)") -----\n" + MILPrinter.print(model) + "\n")
            }
        }
        if options.timePasses { log(timingReport()) }
    }

    /// `--time-passes` table: seconds per pass and share of the total.
    public func timingReport() -> String {
        let total = records.reduce(0) { $0 + $1.seconds }
        var out = "===== pass execution timing =====\n  total: \(fmt(total)) s\n"
        out += "   seconds   share  pass\n"
        for r in records {
            let share = total > 0 ? r.seconds / total * 100 : 0
            out += "  " + pad(fmt(r.seconds), 8) + "  " + pad(String(format: "%.1f%%", share), 6) + "  \(r.name)\n"
        }
        return out
    }

    /// Per-pass statistics, e.g. `dead_code_elimination: ops removed 12`.
    public func statisticsReport() -> String {
        var out = ""
        for r in records where !r.result.statistics.isEmpty {
            out += "\(r.name): " + r.result.statistics.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + "\n"
        }
        return out
    }

    func fmt(_ s: Double) -> String { String(format: "%.4f", s) }
    func pad(_ s: String, _ n: Int) -> String { String(repeating: " ", count: max(0, n - s.count)) + s }
}

import Foundation
