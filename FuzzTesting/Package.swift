// swift-tools-version:6.0
// libFuzzer targets for forge-ir, laid out like swift-protobuf's FuzzTesting/: a separate
// package depending on the parent by path, one executable target per fuzzer. Build with
//   swift build -c release -Xswiftc -sanitize=fuzzer,address --package-path FuzzTesting
// (or `bash scripts/fuzz.sh TARGET SECONDS`). Each main.swift defines
// `LLVMFuzzerTestOneInput` and hands it to libFuzzer's driver (`LLVMFuzzerRunDriver`) from
// its top-level code: SwiftPM renames an executable's `main`, so libFuzzer's own `main`
// cannot be used.
import PackageDescription

let package = Package(
    name: "FuzzTesting",
    dependencies: [
        .package(name: "forge-ir", path: ".."),
    ],
    targets: [
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
    ]
)
