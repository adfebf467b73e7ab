// swift-tools-version:6.0
// libFuzzer targets for forge-ir's readers of untrusted input, one executable per fuzzer (the
// layout of swift-protobuf's FuzzTesting/): a separate package depending on the parent by path.
// Build and run with scripts/fuzz.sh TARGET SECONDS, or:
//   swift build -c release -Xswiftc -sanitize=fuzzer,address --package-path FuzzTesting
//   FuzzTesting/.build/release/FuzzMILText CORPUS_DIR -max_total_time=60
// Each main.swift defines `LLVMFuzzerTestOneInput` with @_cdecl.
import PackageDescription

let package = Package(
    name: "FuzzTesting",
    dependencies: [
        .package(name: "forge-ir", path: ".."),
    ],
    targets: [
        // MIL text (`model.mil` of a compiled .mlmodelc): MILTextParser, then the verifier,
        // the printer and a second parse of the printed text.
        .executableTarget(
            name: "FuzzMILText",
            dependencies: [.product(name: "GraphIR", package: "forge-ir")]
        ),
        // A .mlmodel protobuf plus a weight file: ModelLoader (wire-format scan, protobuf-c,
        // decoder, blob records) and the verifier. Its main.swift hands the entry point to
        // libFuzzer's driver (LLVMFuzzerRunDriver) from top-level code.
        .executableTarget(
            name: "FuzzModelLoader",
            dependencies: [.product(name: "GraphIR", package: "forge-ir")]
        ),
        // The .npy / .npz reader (zip directory, zip64 extras, inflate, npy header).
        .executableTarget(
            name: "FuzzNPY",
            dependencies: [.product(name: "Interpreter", package: "forge-ir")]
        ),
        // Load + verify + run a tiny model whose constants the fuzzer mutates.
        .executableTarget(
            name: "FuzzRun",
            dependencies: [
                .product(name: "GraphIR", package: "forge-ir"),
                .product(name: "Interpreter", package: "forge-ir"),
            ]
        ),
    ],
    swiftLanguageModes: [.v5]
)
