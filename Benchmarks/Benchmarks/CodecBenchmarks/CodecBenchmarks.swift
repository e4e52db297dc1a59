// ProtoCodec vs Foundation JSON on a representative message: ~10 fields, one nested message,
// one repeated field.
import Benchmark
import Foundation
import ProtoCodec

struct Address: Codable, Equatable {
    var street: String
    var city: String
    var postalCode: String
    enum CodingKeys: Int, CodingKey { case street = 1, city, postalCode }
}

struct Account: Codable, Equatable {
    var id: Int64
    var email: String
    var displayName: String
    var verified: Bool
    var loginCount: UInt32
    var score: Double
    var role: String
    var createdAtMillis: Int64
    var address: Address
    var scopes: [String]
    var flags: Int32
    enum CodingKeys: Int, CodingKey {
        case id = 1, email, displayName, verified, loginCount, score, role, createdAtMillis, address, scopes, flags
    }
}

let sample = Account(
    id: 1_234_567_890, email: "ada@example.com", displayName: "Ada Lovelace", verified: true, loginCount: 42,
    score: 98.6, role: "admin", createdAtMillis: 1_700_000_000_000,
    address: Address(street: "12 Analytical Row", city: "London", postalCode: "NW1 6XE"),
    scopes: ["openid", "profile", "email", "offline_access"], flags: -3)

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal],
        maxDuration: .seconds(3),
        maxIterations: 1_000_000
    )

    let protoBytes = try! ProtobufEncoder().encode(sample)
    let jsonBytes = try! JSONEncoder().encode(sample)

    Benchmark("Protobuf encode") { benchmark in
        let encoder = ProtobufEncoder()
        for _ in benchmark.scaledIterations {
            blackHole(try encoder.encode(sample))
        }
    }

    Benchmark("Protobuf decode") { benchmark in
        let decoder = ProtobufDecoder()
        for _ in benchmark.scaledIterations {
            blackHole(try decoder.decode(Account.self, from: protoBytes))
        }
    }

    Benchmark("Protobuf round trip") { benchmark in
        let encoder = ProtobufEncoder()
        let decoder = ProtobufDecoder()
        for _ in benchmark.scaledIterations {
            blackHole(try decoder.decode(Account.self, from: try encoder.encode(sample)))
        }
    }

    Benchmark("JSON round trip") { benchmark in
        let encoder = JSONEncoder()
        let decoder = JSONDecoder()
        for _ in benchmark.scaledIterations {
            blackHole(try decoder.decode(Account.self, from: try encoder.encode(sample)))
        }
    }

    // Sizes for the record (not a timing).
    _ = (protoBytes.count, jsonBytes.count)
}
