// libFuzzer target: the `.npy` / `.npz` reader.
//
// Input layout: one selector byte (even: `.npy`, odd: `.npz`), then the file's bytes. Any
// thrown `NPYError` is fine; a crash, a hang or an allocation beyond the memory budget is a
// finding.
import Foundation
import GraphIR
import Interpreter

let workDir: String = {
    let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
    let dir = base + "/forge-fuzz-npy-\(getpid())"
    try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    return dir
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzNPY(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    guard count >= 1 else { return 0 }
    let bytes = UnsafeRawBufferPointer(start: start, count: count)
    let body = Data(bytes[1...])
    MemoryBudget.limit = 256 << 20
    if bytes[0] & 1 == 0 {
        _ = try? NPY.decode(body, name: "fuzz.npy")
    } else {
        let path = workDir + "/fuzz.npz"
        guard (try? body.write(to: URL(fileURLWithPath: path))) != nil else { return 0 }
        _ = try? NPZ.read(path: path)
    }
    return 0
}

// libFuzzer's driver (compiler-rt, linked by -sanitize=fuzzer).
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(_ argc: UnsafeMutablePointer<Int32>,
                         _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                         _ callback: @convention(c) (UnsafeRawPointer, Int) -> CInt) -> CInt

var fuzzArgc = CommandLine.argc
var fuzzArgv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&fuzzArgc, &fuzzArgv, { data, count in fuzzNPY(data, count) }))
