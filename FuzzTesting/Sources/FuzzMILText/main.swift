#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import GraphIR

/// libFuzzer entry point: MIL text bytes → `MILTextParser` (no model folder, so BLOBFILE
/// references stay unresolved and no file is opened). Any input must end in a parsed program
/// or a `MILTextError` — never a crash, hang or runaway allocation. A parsed program is
/// verified (and a `FlexibleShapeInformation` attribute decoded), printed unelided and parsed again: the printer's text must parse (the printer is
/// the parser's inverse), and must print to the same text.
@_cdecl("LLVMFuzzerTestOneInput")
public func LLVMFuzzerTestOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = start.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? []
    guard let parsed = try? MILTextParser.parse(bytes: bytes, file: "fuzz.mil") else { return 0 }
    let model = Model(specificationVersion: 9, description: ModelDescription(), program: parsed.program)
    _ = try? Verifier.verify(model, path: "fuzz.mil")
    for f in parsed.program.functions {
        for a in f.attributes where a.name == "FlexibleShapeInformation" { _ = try? FlexibleShapeInformation(a.value) }
    }
    let text = MILPrinter.print(model, elideAbove: Int.max)
    let again: MILTextParser.Result
    do {
        again = try MILTextParser.parse(text, file: "printed.mil")
    } catch {
        fatalError("printed text does not parse: \(error)\n--- printed ---\n\(text)")
    }
    let second = MILPrinter.print(Model(specificationVersion: 9, description: ModelDescription(), program: again.program), elideAbove: Int.max)
    if second != text {
        fatalError("print(parse(print(x))) != print(x)\n--- first ---\n\(text)\n--- second ---\n\(second)")
    }
    return 0
}

/// libFuzzer's driver (LLVM ≥ 11). SwiftPM makes main.swift the program's `main`, which would
/// hide libFuzzer's own; so the top-level code hands the command line and the entry point to
/// the driver itself (the same flags as any libFuzzer binary: corpus dirs, -max_total_time=…).
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafeRawPointer?, Int) -> CInt
) -> CInt

var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv, LLVMFuzzerTestOneInput))
