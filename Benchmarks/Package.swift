// swift-tools-version:6.1
// Benchmarks for Gatehouse (package-benchmark). Run from this directory:
//   swift package --disable-sandbox benchmark --target CodecBenchmarks
//   swift package --disable-sandbox benchmark --target IdentityBenchmarks
//   swift package --disable-sandbox benchmark --target TokenBenchmarks
//   (RPCBenchmarks first needs `swift build -c release --product gatehouse-echo-server` in the root)
import PackageDescription

let package = Package(
    name: "GatehouseBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        // `name:` keeps the reference stable whatever the checkout directory is called.
        .package(name: "gatehouse", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "CodecBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "ProtoCodec", package: "gatehouse"),
            ],
            path: "Benchmarks/CodecBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "RPCBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "GatehouseRPC", package: "gatehouse"),
                .product(name: "ZeroMQ", package: "gatehouse"),
            ],
            path: "Benchmarks/RPCBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "IdentityBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "GatehouseRPC", package: "gatehouse"),
                .product(name: "IdentityCore", package: "gatehouse"),
                .product(name: "IdentityService", package: "gatehouse"),
                .product(name: "IdentityPorts", package: "gatehouse"),
                .product(name: "SQLiteStores", package: "gatehouse"),
            ],
            path: "Benchmarks/IdentityBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "TokenBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "GatehouseRPC", package: "gatehouse"),
                .product(name: "TokenCore", package: "gatehouse"),
                .product(name: "TokenService", package: "gatehouse"),
                .product(name: "TokenPorts", package: "gatehouse"),
                .product(name: "SQLiteStores", package: "gatehouse"),
            ],
            path: "Benchmarks/TokenBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ]
)
