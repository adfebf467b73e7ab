// libFuzzer target: load + verify + run a tiny model whose constants the fuzzer mutates.
//
// Input: a `.mlmodel` protobuf (seeds: the inline-constant fixtures of models-ir/). When it
// loads and verifies, its default function is planned and run once on zero inputs of the
// declared shapes (flexible dimensions at their lower bound, at most 4096 elements per input)
// under a 256 MiB memory budget. Thrown errors are fine; a crash, a hang, or an allocation
// beyond the budget is a finding.
import Foundation
import GraphIR
import Interpreter

let workDir: String = {
    let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
    let dir = base + "/forge-fuzz-run-\(getpid())"
    try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    return dir
}()

/// Zero inputs of the declared shapes, or nil when a shape is too large to try.
func zeroInputs(_ f: Function) -> [String: Tensor]? {
    var out: [String: Tensor] = [:]
    for v in f.inputs {
        guard let t = v.type.tensorType else { return nil }
        var shape: [Int] = []
        for d in t.shape {
            switch d {
            case let .fixed(n): shape.append(n)
            case let .symbol(s):
                switch s.constraint {
                case let .range(lower, _): shape.append(max(1, lower))
                case let .enumerated(values): shape.append(values.first ?? 1)
                case .unconstrained: shape.append(1)
                }
            default: shape.append(1)
            }
        }
        guard let n = CheckedSize.elementCount(shape), n <= 4096 else { return nil }
        out[v.name] = Tensor.zeros(t.dtype, shape: shape)
    }
    return out
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRun(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let path = workDir + "/model.mlmodel"
    guard (try? Data(bytes: start, count: count).write(to: URL(fileURLWithPath: path))) != nil else { return 0 }
    MemoryBudget.limit = 256 << 20
    guard let model = try? ModelLoader.load(path: path),
          let session = try? Session(model: model),
          let inputs = zeroInputs(session.function) else { return 0 }
    _ = try? session.predict(inputs)
    return 0
}

// libFuzzer's driver (compiler-rt, linked by -sanitize=fuzzer).
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(_ argc: UnsafeMutablePointer<Int32>,
                         _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                         _ callback: @convention(c) (UnsafeRawPointer, Int) -> CInt) -> CInt

var fuzzArgc = CommandLine.argc
var fuzzArgv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&fuzzArgc, &fuzzArgv, { data, count in fuzzRun(data, count) }))
