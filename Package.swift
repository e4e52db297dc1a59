// swift-tools-version:6.2
import PackageDescription

/// One set of Swift settings for every target (Swift 6 language mode is the default for tools 6.x).
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "gatehouse",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "gatehouse", targets: ["gatehouse"]),
        .library(name: "ProtoCodec", targets: ["ProtoCodec"]),
        .library(name: "GatehouseRPC", targets: ["GatehouseRPC", "GatehouseProtocol"]),
        .executable(name: "gatehouse-load", targets: ["gatehouse-load"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // Load generator (gatehouse-load) and its test server.
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
    ],
    targets: [
        // MARK: Foundation: codec, ZeroMQ, RPC
        .target(name: "ProtoCodec", swiftSettings: swiftSettings),
        .target(
            name: "GatehouseProtocol",
            dependencies: ["ProtoCodec", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        .systemLibrary(
            name: "CZeroMQ",
            pkgConfig: "libzmq",
            providers: [.apt(["libzmq3-dev"]), .brew(["zeromq"])]
        ),
        .target(
            name: "ZeroMQ",
            dependencies: ["CZeroMQ"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "GatehouseRPC",
            dependencies: [
                "ProtoCodec", "GatehouseProtocol", "ZeroMQ",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "gatehouse",
            dependencies: [
                "GatehouseRPC",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: Load generator
        .target(
            name: "LoadGenerator",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "gatehouse-load",
            dependencies: [
                "LoadGenerator",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: Tests
        .testTarget(name: "ProtoCodecTests", dependencies: ["ProtoCodec"], swiftSettings: swiftSettings),
        .testTarget(name: "ZeroMQTests", dependencies: ["ZeroMQ"], swiftSettings: swiftSettings),
        .testTarget(
            name: "GatehouseRPCTests",
            dependencies: [
                "GatehouseRPC", "GatehouseProtocol", "ProtoCodec", "ZeroMQ",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // Drives the LoadGenerator core against an in-process Hummingbird fake of the HTTP API.
        .testTarget(
            name: "LoadGeneratorTests",
            dependencies: [
                "LoadGenerator",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
