// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "forge-ir",
    products: [
        .library(name: "JSON", targets: ["JSON"]),
        .library(name: "GraphIR", targets: ["GraphIR"]),
        .library(name: "Interpreter", targets: ["Interpreter"]),
        .library(name: "Passes", targets: ["Passes"]),
        .library(name: "Tokenizers", targets: ["Tokenizers"]),
        .library(name: "Generation", targets: ["Generation"]),
        .library(name: "Diagnostics", targets: ["Diagnostics"]),
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
        // The one JSON value, encoder and parser (order-keeping objects); knows nothing of models.
        .target(name: "JSON"),
        .target(name: "GraphIR", dependencies: ["CoreMLProto", "JSON"]),
        // Hot loops of the Interpreter: GEMM, int8 block products, attention over fp16/fp32
        // KV caches, softmax (AVX-512 or AVX2+FMA+F16C bodies picked at run time, portable
        // fallback; per-function target attributes, no unsafeFlags).
        .target(name: "CKernels"),
        .target(
            name: "Interpreter",
            dependencies: ["GraphIR", "CZlib", "CKernels"]
        ),
        // IR → IR: passes (folding runs through the interpreter's kernels), shape inference and
        // the static diagnosis.
        .target(name: "Passes", dependencies: ["GraphIR", "Interpreter"]),
        // Hugging Face tokenizer.json and chat templates; knows nothing of models.
        .target(name: "Tokenizers", dependencies: ["JSON"]),
        // Driving LLM packages: input contracts, the generator, sampling.
        .target(name: "Generation", dependencies: ["GraphIR", "Interpreter", "Tokenizers"]),
        // Analyses that run the model (fp16 overflow, S=1 vs S=N): above the passes and the
        // interpreter.
        .target(name: "Diagnostics", dependencies: ["GraphIR", "Interpreter", "Passes", "Generation"]),
        // Intermediate values on disk, error metrics, `forge-ir compare`'s walk.
        .target(name: "Comparison", dependencies: ["GraphIR", "Interpreter"]),
        .executableTarget(
            name: "forge-ir",
            dependencies: ["GraphIR", "Interpreter", "Passes", "Tokenizers", "Generation", "Diagnostics", "Comparison"]
        ),
        // Shared by every test target: fixture paths, the seeded RNG, closeness checks, the
        // op-vector runner and the FileCheck matcher.
        .target(
            name: "TestSupport",
            dependencies: ["GraphIR", "Interpreter"],
            path: "Tests/TestSupport"
        ),
        .testTarget(name: "JSONTests", dependencies: ["JSON", "TestSupport"]),
        .testTarget(name: "GraphIRTests", dependencies: ["GraphIR", "TestSupport"]),
        .testTarget(name: "InterpreterTests", dependencies: ["GraphIR", "Interpreter", "TestSupport"]),
        .testTarget(name: "PassesTests", dependencies: ["GraphIR", "Interpreter", "Passes", "TestSupport"]),
        .testTarget(name: "TokenizersTests", dependencies: ["Tokenizers", "TestSupport"]),
        .testTarget(name: "GenerationTests", dependencies: ["GraphIR", "Interpreter", "Generation", "TestSupport"]),
        .testTarget(
            name: "DiagnosticsTests",
            dependencies: ["GraphIR", "Interpreter", "Passes", "Generation", "Diagnostics", "TestSupport"]
        ),
        // Snapshot tests of the built `forge-ir` binary (exit codes, stdout, stderr); the
        // dependency makes `swift test` build the executable first.
        .testTarget(
            name: "ForgeCLITests",
            dependencies: ["forge-ir", "GraphIR", "Interpreter", "TestSupport", "Comparison"],
            exclude: ["Snapshots"]
        ),
    ],
    swiftLanguageModes: [.v5]
)
