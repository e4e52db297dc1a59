// swift-tools-version:6.2
import PackageDescription

/// One set of Swift settings for every target (Swift 6 language mode is the default for tools 6.x).
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    // A member is visible only where its module is imported (SE-0444): every file names what it uses.
    .enableUpcomingFeature("MemberImportVisibility"),
]

/// The condition on every dependency of the server's targets (see `traits`).
let server: TargetDependencyCondition? = .when(traits: ["Server"])

let package = Package(
    name: "gatehouse",
    // iOS for the client library (GatehouseClient); the server targets need macOS 15.
    platforms: [.macOS(.v15), .iOS(.v16)],
    products: [
        .executable(name: "gatehouse", targets: ["gatehouse"]),
        // What an app links (Foundation only): issue 23.
        .library(name: "GatehouseClient", targets: ["GatehouseClient"]),
        .library(name: "ProtoCodec", targets: ["ProtoCodec"]),
        .library(name: "GatehouseRPC", targets: ["GatehouseRPC", "RPCRouting", "GatehouseContracts"]),
        .library(name: "ZeroMQ", targets: ["ZeroMQ"]),
        .executable(name: "gatehouse-echo-server", targets: ["gatehouse-echo-server"]),
        .executable(name: "gatehouse-load", targets: ["gatehouse-load"]),
        // For the Benchmarks package.
        .library(name: "GatehouseContracts", targets: ["GatehouseContracts"]),
        .library(name: "GatehouseSupport", targets: ["GatehouseSupport"]),
        .library(name: "IdentityCore", targets: ["IdentityCore"]),
        .library(name: "IdentityService", targets: ["IdentityService"]),
        .library(name: "TokenCore", targets: ["TokenCore"]),
        .library(name: "TokenService", targets: ["TokenService"]),
        .library(name: "TokenPorts", targets: ["TokenPorts"]),
        .library(name: "SQLiteStores", targets: ["SQLiteStores"]),
        .library(name: "IdentityPorts", targets: ["IdentityPorts"]),
    ],
    // `Server` (on by default) is everything but the client library: every dependency of the
    // server is guarded by it, so an app that adds this package with `traits: []` for
    // `GatehouseClient` resolves none of them (issue 37 §5; a test checks a scratch app's
    // Package.resolved).
    traits: [
        .trait(name: "Server", description: "The server, its tools and tests: every dependency of the package but none of the client library's."),
        .default(enabledTraits: ["Server"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.8.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        // Load generator (gatehouse-load).
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.0"),
        // The gateway's connection handler sits in Hummingbird's NIO pipeline (HTTP parts).
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        // The SMTP client's TLS (STARTTLS and implicit TLS).
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // Mail templates (password reset, issue 19).
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.1"),
    ],
    targets: [
        // MARK: The client library (Foundation only: none of the server's dependencies)
        .target(name: "GatehouseClient", swiftSettings: swiftSettings),
        // Seeds 000 and 002 walked through with the library (run by EndToEndTests).
        .executableTarget(
            name: "gatehouse-client-example", dependencies: ["GatehouseClient"], path: "Examples/ClientWalkthrough", swiftSettings: swiftSettings),
        // MARK: Foundation: codec, ZeroMQ, RPC
        .target(name: "ProtoCodec", swiftSettings: swiftSettings),
        // Every message type, method name and error code of proto/*.proto, and nothing else.
        .target(name: "GatehouseContracts", swiftSettings: swiftSettings),
        // Small pure helpers shared by every layer: JSON writer and reader, base64url, thread names, truncation,
        // W3C trace parents and the task's current trace.
        .target(name: "GatehouseSupport", swiftSettings: swiftSettings),
        // The jsonl form of users (`UserJSONL`): what `gatehouse users import|export` and the admin
        // API's import and export routes read and write.
        .target(name: "UserTransfer", dependencies: ["GatehouseContracts", "GatehouseSupport"], swiftSettings: swiftSettings),
        // Mail as Gatehouse sends it: the message, its MIME text, the transport interface.
        .target(name: "Mail", swiftSettings: swiftSettings),
        // A small SMTP client on SwiftNIO (+ NIOSSL): the `MailTransport` that hands mail to a relay.
        .target(
            name: "SMTPClient",
            dependencies: [
                "Mail",
                .product(name: "Logging", package: "swift-log", condition: server),
                .product(name: "NIOCore", package: "swift-nio", condition: server),
                .product(name: "NIOPosix", package: "swift-nio", condition: server),
                .product(name: "NIOSSL", package: "swift-nio-ssl", condition: server),
            ],
            swiftSettings: swiftSettings
        ),
        // Typed handlers behind method names, and the caller abstraction (no sockets).
        .target(
            name: "RPCRouting",
            dependencies: ["ProtoCodec", "GatehouseContracts", "GatehouseSupport", .product(name: "Logging", package: "swift-log", condition: server)],
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
                "ProtoCodec", "GatehouseContracts", "GatehouseSupport", "RPCRouting", "ZeroMQ",
                .product(name: "Logging", package: "swift-log", condition: server),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: server),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "GatehouseApp",
            dependencies: [
                "GatehouseRPC", "GatehouseContracts", "GatehouseSupport", "RPCRouting", "IdentityCore", "IdentityService",
                "TokenCore", "TokenService", "Gateway", "ZeroMQ", "SMTPClient", "Mail", "SQLiteSupport", "ProviderTokens",
                "PostgresSupport", "PostgresStores", "TokenPorts", "SQLiteStores", "IdentityPorts", "UserTransfer", "ProtoCodec",
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: server),
                .product(name: "NIOCore", package: "swift-nio", condition: server),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: server),
                .product(name: "PostgresNIO", package: "postgres-nio", condition: server),
                .product(name: "GRDB", package: "GRDB.swift", condition: server),
                .product(name: "Hummingbird", package: "hummingbird", condition: server),
                .product(name: "Crypto", package: "swift-crypto", condition: server),
                .product(name: "Logging", package: "swift-log", condition: server),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: server),
                .product(name: "UnixSignals", package: "swift-service-lifecycle", condition: server),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "gatehouse",
            dependencies: [
                "GatehouseApp",
                .product(name: "ArgumentParser", package: "swift-argument-parser", condition: server),
                .product(name: "Logging", package: "swift-log", condition: server),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: server),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: HTTP gateway
        .target(
            name: "Gateway",
            dependencies: [
                "GatehouseContracts", "GatehouseSupport", "RPCRouting", "UserTransfer", "ProtoCodec",
                .product(name: "Hummingbird", package: "hummingbird", condition: server),
                .product(name: "HummingbirdCore", package: "hummingbird", condition: server),
                .product(name: "NIOCore", package: "swift-nio", condition: server),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: server),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras", condition: server),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras", condition: server),
                .product(name: "JWTKit", package: "jwt-kit", condition: server),
                // The action pages (GET/POST /actions): templates, and the hash of their style for the CSP.
                .product(name: "Mustache", package: "swift-mustache", condition: server),
                .product(name: "Crypto", package: "swift-crypto", condition: server),
                .product(name: "Prometheus", package: "swift-prometheus", condition: server),
                .product(name: "Metrics", package: "swift-metrics", condition: server),
                .product(name: "Logging", package: "swift-log", condition: server),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: server),
            ],
            exclude: ["Resources/openapi.json", "Resources/admin-openapi.json"],
            swiftSettings: swiftSettings
        ),
        // MARK: Identity service
        .systemLibrary(
            name: "CArgon2",
            pkgConfig: "libargon2",
            providers: [.apt(["libargon2-dev"]), .brew(["argon2"])]
        ),
        // libxcrypt's crypt_r (bcrypt `$2b$`, scrypt `$7$`) and OpenSSL's scrypt KDF, for
        // verifying imported hashes.
        .systemLibrary(
            name: "CLegacyHashes",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev", "libcrypt-dev"]), .brew(["openssl@3"])]
        ),
        .target(
            name: "IdentityCore",
            dependencies: ["GatehouseSupport", "Mail"],
            // The blocklist is compiled in (CommonPasswords+List.swift, generated from
            // Resources/common-passwords.txt by scripts/gen-common-passwords), so no resource bundle
            // has to travel with the binary.
            exclude: ["Resources"],
            swiftSettings: swiftSettings
        ),
        // Point reads through the SQLite C API on GRDB's connections (both services' hot paths).
        .target(
            name: "SQLiteSupport",
            dependencies: [
                "GatehouseContracts", "GatehouseSupport",
                .product(name: "GRDB", package: "GRDB.swift", condition: server),
                .product(name: "GRDBSQLite", package: "GRDB.swift", condition: server),
            ],
            swiftSettings: swiftSettings
        ),
        // The identity service's storage ports: `IdentityStorage` and the narrower ones it is made
        // of, their rows and outcomes, the audit scope of a running call (no store in it).
        .target(
            name: "IdentityPorts",
            dependencies: ["IdentityCore", "GatehouseContracts", "GatehouseSupport", "Mail"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "IdentityService",
            dependencies: [
                "IdentityCore", "IdentityPorts", "GatehouseContracts", "GatehouseSupport", "RPCRouting", "ProtoCodec", "CArgon2",
                "CLegacyHashes", "Mail", "ProviderTokens",
                .product(name: "Logging", package: "swift-log", condition: server),
                .product(name: "Mustache", package: "swift-mustache", condition: server),
                .product(name: "Crypto", package: "swift-crypto", condition: server),
            ],
            swiftSettings: swiftSettings
        ),
        // MARK: PostgreSQL (issue 24)
        // Connection settings (`GATEHOUSE_DATABASE_URL`) and migrations under an advisory lock;
        // the stores will be built on it.
        .target(
            name: "PostgresSupport",
            dependencies: [
                .product(name: "PostgresNIO", package: "postgres-nio", condition: server),
                .product(name: "NIOSSL", package: "swift-nio-ssl", condition: server),
                .product(name: "Logging", package: "swift-log", condition: server),
            ],
            swiftSettings: swiftSettings
        ),
        // The stores on PostgreSQL (issue 24): the user store so far.
        .target(
            name: "PostgresStores",
            dependencies: [
                "IdentityCore", "IdentityPorts", "Mail", "ProviderTokens", "GatehouseSupport", "PostgresSupport", "TokenPorts",
                "TokenCore", "GatehouseContracts",
                .product(name: "PostgresNIO", package: "postgres-nio", condition: server),
                .product(name: "Crypto", package: "swift-crypto", condition: server),
                .product(name: "Logging", package: "swift-log", condition: server),
            ],
            swiftSettings: swiftSettings
        ),
        // Against a real PostgreSQL server started by the tests (GatehouseTestSupport.PostgresServer).
        .testTarget(
            name: "PostgresSupportTests",
            dependencies: [
                "PostgresSupport", "GatehouseTestSupport",
                .product(name: "PostgresNIO", package: "postgres-nio", condition: server),
                .product(name: "Logging", package: "swift-log", condition: server),
            ],
            swiftSettings: swiftSettings
        ),
        // MARK: Provider ID tokens (issue 20)
        // Verifies Sign in with Apple, Google and OpenID Connect ID tokens against the providers'
        // JWKS (fetched with AsyncHTTPClient, cached); no RPC, no HTTP routes.
        .target(
            name: "ProviderTokens",
            dependencies: [
                "GatehouseSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: server),
                .product(name: "Crypto", package: "swift-crypto", condition: server),
                .product(name: "_CryptoExtras", package: "swift-crypto", condition: server),
                .product(name: "Logging", package: "swift-log", condition: server),
                .product(name: "NIOCore", package: "swift-nio", condition: server),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: server),
            ],
            swiftSettings: swiftSettings
        ),
        // A fake OpenID provider (discovery, JWKS) and test signing keys served by Hummingbird on
        // 127.0.0.1, for ProviderTokensTests and the end-to-end tests; independent of the server's modules.
        .target(
            name: "ProviderTestSupport",
            dependencies: [
                "GatehouseSupport",
                .product(name: "Hummingbird", package: "hummingbird", condition: server),
                .product(name: "Crypto", package: "swift-crypto", condition: server),
                .product(name: "_CryptoExtras", package: "swift-crypto", condition: server),
                .product(name: "Logging", package: "swift-log", condition: server),
                .product(name: "NIOCore", package: "swift-nio", condition: server),
            ],
            swiftSettings: swiftSettings
        ),
        // MARK: Token service
        .target(
            name: "TokenCore",
            dependencies: [
                "GatehouseSupport",
                .product(name: "JWTKit", package: "jwt-kit", condition: server),
                .product(name: "Crypto", package: "swift-crypto", condition: server),
                .product(name: "_CryptoExtras", package: "swift-crypto", condition: server),
            ],
            swiftSettings: swiftSettings
        ),
        // The token service's storage port: `TokenStorage`, its rows and outcomes (no store in it).
        .target(
            name: "TokenPorts",
            dependencies: ["TokenCore", "GatehouseContracts", "GatehouseSupport"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TokenService",
            dependencies: [
                "TokenCore", "TokenPorts", "GatehouseContracts", "GatehouseSupport", "RPCRouting", "ProtoCodec",
                .product(name: "Crypto", package: "swift-crypto", condition: server),
                .product(name: "Logging", package: "swift-log", condition: server),
            ],
            swiftSettings: swiftSettings
        ),
        // The stores on SQLite (the embedded default): adapters of the ports, beside PostgresStores.
        .target(
            name: "SQLiteStores",
            dependencies: [
                "TokenCore", "TokenPorts", "IdentityCore", "IdentityPorts", "Mail", "GatehouseContracts", "GatehouseSupport", "SQLiteSupport",
                .product(name: "GRDB", package: "GRDB.swift", condition: server),
                .product(name: "GRDBSQLite", package: "GRDB.swift", condition: server),
                .product(name: "Logging", package: "swift-log", condition: server),
                .product(name: "Crypto", package: "swift-crypto", condition: server),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: Tools (Tools/): test helpers, benchmark and load programs; no server target depends on them
        // Test helper for the kill -9 test: inserts users, printing each acknowledged id (stops after 60 s).
        .executableTarget(
            name: "identity-crash-writer",
            dependencies: ["IdentityService", "IdentityCore", "IdentityPorts", "SQLiteStores", "GatehouseContracts"],
            path: "Tools/identity-crash-writer",
            swiftSettings: swiftSettings
        ),
        // Test helper for the token kill -9 test: issues and refreshes sessions, printing each
        // acknowledged session id and latest refresh token (stops after 60 s).
        .executableTarget(
            name: "token-crash-writer",
            dependencies: ["TokenService", "TokenCore", "TokenPorts", "SQLiteStores", "GatehouseContracts", "RPCRouting"],
            path: "Tools/token-crash-writer",
            swiftSettings: swiftSettings
        ),
        // The other process of the two-process RPC benchmarks (Benchmarks/).
        .executableTarget(
            name: "gatehouse-echo-server",
            dependencies: ["GatehouseRPC", "GatehouseContracts", "RPCRouting", "ZeroMQ"],
            path: "Tools/gatehouse-echo-server",
            swiftSettings: swiftSettings
        ),
        // The load generator (gatehouse-load) and its epoll binding.
        .systemLibrary(name: "CEpoll", path: "Tools/CEpoll"),
        .target(
            name: "LoadGenerator",
            dependencies: [
                "CEpoll", "GatehouseSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: server),
                .product(name: "Crypto", package: "swift-crypto", condition: server),
                .product(name: "Histogram", package: "hdrhistogram-swift", condition: server),
                .product(name: "NIOCore", package: "swift-nio", condition: server),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: server),
                .product(name: "NIOPosix", package: "swift-nio", condition: server),
            ],
            path: "Tools/LoadGenerator",
            swiftSettings: swiftSettings
        ),
        // The ceiling route for the `GET /v1/me` load test (BENCHMARKS.md): only verifies the JWT.
        .executableTarget(
            name: "gatehouse-jwt-ceiling",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird", condition: server),
                .product(name: "JWTKit", package: "jwt-kit", condition: server),
                .product(name: "ArgumentParser", package: "swift-argument-parser", condition: server),
            ],
            path: "Tools/gatehouse-jwt-ceiling",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "gatehouse-load",
            dependencies: [
                "LoadGenerator",
                .product(name: "ArgumentParser", package: "swift-argument-parser", condition: server),
            ],
            path: "Tools/gatehouse-load",
            swiftSettings: swiftSettings
        ),

        // MARK: Tests
        // Fakes, the manual wall clock, temporary folders, process launchers and waiting with a
        // deadline, shared by the test targets (no production target depends on it).
        .target(
            name: "GatehouseTestSupport",
            dependencies: [
                "GatehouseContracts", "GatehouseSupport", "RPCRouting", "IdentityCore", "IdentityPorts", "IdentityService", "ProtoCodec",
                "CTestSupport", "Mail", "SQLiteStores", "PostgresStores",
                .product(name: "PostgresNIO", package: "postgres-nio", condition: server),
                .product(name: "GRDB", package: "GRDB.swift", condition: server),
            ],
            swiftSettings: swiftSettings
        ),
        // Caps how many tests run at once in the test process (see parallelism.c).
        .target(name: "CTestSupport"),
        // Drives the LoadGenerator core against an in-process Hummingbird fake of the HTTP API.
        .testTarget(
            name: "LoadGeneratorTests",
            dependencies: [
                "LoadGenerator", "GatehouseTestSupport", "GatehouseSupport",
                .product(name: "Crypto", package: "swift-crypto", condition: server),
                .product(name: "Histogram", package: "hdrhistogram-swift", condition: server),
                .product(name: "Hummingbird", package: "hummingbird", condition: server),
                .product(name: "Logging", package: "swift-log", condition: server),
                .product(name: "NIOCore", package: "swift-nio", condition: server),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: server),
                .product(name: "NIOPosix", package: "swift-nio", condition: server),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GatehouseAppTests",
            dependencies: [
                "GatehouseApp", "GatehouseRPC", "GatehouseContracts", "GatehouseSupport", "RPCRouting", "IdentityCore", "IdentityService",
                "TokenService", "TokenCore", "TokenPorts", "SQLiteStores", "IdentityPorts", "GatehouseTestSupport", "Gateway", "SMTPClient",
                "PostgresSupport", "ProviderTokens", "SQLiteSupport", "UserTransfer",
                .product(name: "GRDB", package: "GRDB.swift", condition: server),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: server),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle", condition: server),
            ],
            swiftSettings: swiftSettings
        ),
        // Reads Package.swift and ARCHITECTURE.md: every arrow between our targets must be allowed.
        .testTarget(name: "ArchitectureTests", dependencies: ["GatehouseTestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "ProtoCodecTests", dependencies: ["ProtoCodec"], swiftSettings: swiftSettings),
        // The client library's problem codes against the contract's codes and the gateway's error table.
        .testTarget(
            name: "GatehouseClientTests", dependencies: ["GatehouseClient", "GatehouseContracts", "Gateway"],
            swiftSettings: swiftSettings),
        // Byte-for-byte interop with Python's protobuf, and the contract golden test (GatehouseContracts vs
        // proto/*.proto); needs python3 with grpcio-tools and protobuf.
        .testTarget(
            name: "InteropTests", dependencies: ["ProtoCodec", "GatehouseContracts", "GatehouseTestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(name: "ZeroMQTests", dependencies: ["ZeroMQ", "GatehouseTestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "IdentityCoreTests", dependencies: ["IdentityCore", "GatehouseSupport"], swiftSettings: swiftSettings),
        // The token core's decisions, table by table (no I/O).
        .testTarget(name: "TokenCoreTests", dependencies: ["TokenCore"], swiftSettings: swiftSettings),
        .testTarget(name: "GatehouseSupportTests", dependencies: ["GatehouseSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "MailTests", dependencies: ["Mail"], swiftSettings: swiftSettings),
        // Delivers through SMTPTransport to a real SMTP server (aiosmtpd, Tests/Interop/smtp_server.py).
        .testTarget(
            name: "SMTPClientTests",
            dependencies: ["SMTPClient", "Mail", "GatehouseTestSupport", .product(name: "Logging", package: "swift-log", condition: server)],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "IdentityServiceTests",
            dependencies: [
                "PostgresStores", "PostgresSupport", .product(name: "PostgresNIO", package: "postgres-nio", condition: server),
                "IdentityService", "IdentityCore", "IdentityPorts", "SQLiteStores", "GatehouseContracts", "GatehouseSupport", "RPCRouting",
                "ProtoCodec", "identity-crash-writer", "SQLiteSupport", "GatehouseTestSupport", "Mail",
                .product(name: "GRDB", package: "GRDB.swift", condition: server),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GatehouseRPCTests",
            dependencies: [
                "GatehouseRPC", "GatehouseContracts", "GatehouseSupport", "RPCRouting", "ProtoCodec", "ZeroMQ",
                "GatehouseTestSupport",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: server),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle", condition: server),
            ],
            swiftSettings: swiftSettings
        ),
        // Starts the built `gatehouse` binary as processes and drives it over HTTP.
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "gatehouse", "GatehouseApp", "GatehouseTestSupport", "GatehouseSupport", "IdentityCore", "IdentityPorts", "IdentityService",
                "SQLiteStores", "GatehouseRPC", "GatehouseContracts", "Mail", "RPCRouting",
                // The Swift client library, driven against the running stack (issue 23), and its example.
                "GatehouseClient", "gatehouse-client-example",
                // The fake OpenID provider (and Apple's token endpoints) for federated sign-in.
                "ProviderTestSupport",
                // Reads the identity database's outbox read-only (password reset, until mail delivery lands).
                .product(name: "GRDB", package: "GRDB.swift", condition: server),
            ],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "TokenServiceTests",
            dependencies: [
                "TokenService", "TokenCore", "TokenPorts", "SQLiteStores", "GatehouseContracts", "GatehouseSupport", "RPCRouting",
                "ProtoCodec", "token-crash-writer", "GatehouseTestSupport",
                "PostgresStores", "PostgresSupport", .product(name: "PostgresNIO", package: "postgres-nio", condition: server),
                .product(name: "Logging", package: "swift-log", condition: server),
                .product(name: "Crypto", package: "swift-crypto", condition: server),
                .product(name: "GRDB", package: "GRDB.swift", condition: server),
            ],
            swiftSettings: swiftSettings
        ),
        // Verifies tokens against the fake OpenID provider of ProviderTestSupport (HTTP on 127.0.0.1).
        .testTarget(
            name: "ProviderTokensTests",
            dependencies: [
                "ProviderTokens", "ProviderTestSupport", "GatehouseSupport", "GatehouseTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: server),
                .product(name: "Crypto", package: "swift-crypto", condition: server),
                .product(name: "_CryptoExtras", package: "swift-crypto", condition: server),
                .product(name: "Logging", package: "swift-log", condition: server),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GatewayTests",
            dependencies: [
                "Gateway", "GatehouseContracts", "GatehouseSupport", "RPCRouting", "IdentityCore", "IdentityService", "TokenService",
                "TokenPorts", "SQLiteStores", "IdentityPorts",
                "ProtoCodec", "GatehouseTestSupport", "Mail",
                .product(name: "HummingbirdTesting", package: "hummingbird", condition: server),
                .product(name: "JWTKit", package: "jwt-kit", condition: server),
                .product(name: "Metrics", package: "swift-metrics", condition: server),
                .product(name: "Prometheus", package: "swift-prometheus", condition: server),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
