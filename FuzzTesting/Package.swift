// swift-tools-version:6.0
// libFuzzer targets for forge-ir, laid out like swift-protobuf's FuzzTesting/: a separate
// package depending on the parent by path, one executable target per fuzzer. Build with
//   swift build -c release -Xswiftc -sanitize=fuzzer,address --package-path FuzzTesting
// (or `bash scripts/fuzz.sh TARGET SECONDS`). Each main.swift defines
// `LLVMFuzzerTestOneInput` for libFuzzer.
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
        // decoder, blob records) and the verifier.
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
