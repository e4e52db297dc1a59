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
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.8.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
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

        // MARK: HTTP gateway
        .target(
            name: "Gateway",
            dependencies: [
                "GatehouseProtocol",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            exclude: ["Resources/openapi.json"],
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
        .testTarget(
            name: "GatewayTests",
            dependencies: [
                "Gateway", "GatehouseProtocol",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
