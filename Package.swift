// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "forge-ir",
    products: [
        .library(name: "GraphIR", targets: ["GraphIR"]),
        .executable(name: "forge-ir", targets: ["forge-ir"]),
    ],
    targets: [
        // libprotobuf-c from Debian (apt-get install libprotobuf-c-dev).
        .systemLibrary(
            name: "CProtobufC",
            pkgConfig: "libprotobuf-c",
            providers: [.apt(["libprotobuf-c-dev"])]
        ),
        // protoc-c output of proto/*.proto; regenerate with scripts/regen-proto.sh.
        .target(
            name: "CoreMLProto",
            dependencies: ["CProtobufC"]
        ),
        .target(name: "GraphIR", dependencies: ["CoreMLProto"]),
        .executableTarget(name: "forge-ir", dependencies: ["GraphIR"]),
        .testTarget(
            name: "GraphIRTests",
            dependencies: ["GraphIR"],
            resources: []
        ),
    ],
    swiftLanguageModes: [.v5]
)
