// TEMPORARY STUB: JSON under the hood with the final API shape, replaced by the real
// protobuf wire-format coders.
import Foundation

public struct ProtobufEncoder: Sendable {
    public init() {}
    public func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        Array(try JSONEncoder().encode(value))
    }
}

public struct ProtobufDecoder: Sendable {
    public init() {}
    public func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try JSONDecoder().decode(type, from: Data(bytes))
    }
}
