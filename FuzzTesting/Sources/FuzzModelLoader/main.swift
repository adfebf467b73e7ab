// libFuzzer target: ModelLoader + Verifier on a `.mlmodel` protobuf and its weight file.
//
// Input layout: a little-endian u32 N, then N bytes of `model.mlmodel`, then the bytes of
// `weights/weight.bin` (what `@model_path/weights/weight.bin` resolves to). Both are written
// to a private folder under /dev/shm (or $TMPDIR) and loaded through the public API, so the
// same checks run as for a user's file. Any thrown error is fine; a crash, hang, or an
// allocation over libFuzzer's -rss_limit_mb / -malloc_limit_mb is a finding.
import Foundation
import GraphIR

let workDir: String = {
    let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
    let dir = base + "/forge-fuzz-loader-\(getpid())"
    try? FileManager.default.createDirectory(atPath: dir + "/weights", withIntermediateDirectories: true)
    return dir
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzModelLoader(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: start, count: count)
    guard count >= 4 else { return 0 }
    MemoryBudget.limit = 256 << 20
    let n = Int(bytes.loadUnaligned(as: UInt32.self).littleEndian)
    let specEnd = min(count, 4 + n)
    let spec = Data(bytes[4..<specEnd])
    let weights = Data(bytes[specEnd...])
    let specPath = workDir + "/model.mlmodel"
    do {
        try spec.write(to: URL(fileURLWithPath: specPath))
        try weights.write(to: URL(fileURLWithPath: workDir + "/weights/weight.bin"))
    } catch {
        return 0
    }
    if let model = try? ModelLoader.load(path: specPath) {
        // Printing and summarising walk every type and constant: overflow traps show up here.
        _ = MILPrinter.print(model)
        _ = ModelSummary(model)
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
exit(LLVMFuzzerRunDriver(&fuzzArgc, &fuzzArgv, { data, count in fuzzModelLoader(data, count) }))
