// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "forge-ir",
    products: [
        .library(name: "GraphIR", targets: ["GraphIR"]),
        .library(name: "Interpreter", targets: ["Interpreter"]),
        .library(name: "Passes", targets: ["Passes"]),
        .library(name: "StateOps", targets: ["StateOps"]),
        .library(name: "Comparison", targets: ["Comparison"]),
        .executable(name: "forge-ir", targets: ["forge-ir"]),
    ],
    targets: [
        // libprotobuf-c from Debian (apt-get install libprotobuf-c-dev).
        .systemLibrary(
            name: "CProtobufC",
            pkgConfig: "libprotobuf-c",
            providers: [.apt(["libprotobuf-c-dev"])]
        ),
        // zlib from Debian (zlib1g-dev), for compressed .npz members.
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        // protoc-c output of proto/*.proto; regenerate with scripts/regen-proto.sh.
        .target(
            name: "CoreMLProto",
            dependencies: ["CProtobufC"]
        ),
        .target(name: "GraphIR", dependencies: ["CoreMLProto"]),
        // Hot loops of the Interpreter: GEMM, int8 block products, attention over fp16/fp32
        // KV caches, softmax (AVX-512 or AVX2+FMA+F16C bodies picked at run time, portable
        // fallback; per-function target attributes, no unsafeFlags).
        .target(name: "CKernels"),
        .target(
            name: "Interpreter",
            dependencies: ["GraphIR", "CZlib", "CKernels"]
        ),
        .target(name: "Passes", dependencies: ["GraphIR", "Interpreter"]),
        .target(name: "StateOps", dependencies: ["GraphIR", "Interpreter"]),
        // Intermediate values on disk, error metrics, `forge-ir compare`'s walk.
        .target(name: "Comparison", dependencies: ["GraphIR", "Interpreter", "StateOps"]),
        .executableTarget(name: "forge-ir", dependencies: ["GraphIR", "Interpreter", "Passes", "StateOps", "Comparison"]),
        .testTarget(
            name: "GraphIRTests",
            dependencies: ["GraphIR"],
            resources: []
        ),
        .testTarget(
            name: "PassesTests",
            dependencies: ["GraphIR", "Interpreter", "Passes", "StateOps"]
        ),
        .testTarget(
            name: "InterpreterTests",
            dependencies: ["GraphIR", "Interpreter", "StateOps"]
        ),
        // Snapshot tests of the built `forge-ir` binary (exit codes, stdout, stderr); the
        // dependency makes `swift test` build the executable first.
        .testTarget(
            name: "ForgeCLITests",
            dependencies: ["forge-ir", "GraphIR", "Interpreter", "Comparison"],
            exclude: ["Snapshots"]
        ),
    ],
    swiftLanguageModes: [.v5]
)
