// swift-tools-version:6.0
// libFuzzer targets for forge-ir's parsers of untrusted input, one executable per fuzzer
// (the layout of swift-protobuf's FuzzTesting/). Build and run with scripts/fuzz.sh:
//   swift build -c release -Xswiftc -sanitize=fuzzer,address --package-path FuzzTesting
//   FuzzTesting/.build/release/FuzzMILText CORPUS_DIR -max_total_time=60
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
    ],
    swiftLanguageModes: [.v5]
)
