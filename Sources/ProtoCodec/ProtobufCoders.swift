/// # ProtoCodec
///
/// A `Codable` encoder/decoder pair for the Protocol Buffers binary wire format (proto3
/// semantics), pure Swift on Foundation, no I/O.
///
/// ## Field numbers
/// A field's number is its `CodingKey`'s `intValue`: `enum CodingKeys: Int, CodingKey { case id = 1 }`.
/// A key without an `intValue`, or outside `1...536_870_911`, is an `EncodingError.invalidValue` /
/// `DecodingError.dataCorrupted` naming the key type and key. Fields are written in the order
/// `encode(to:)` encodes them (synthesized conformances use declaration order, so declare fields
/// in field-number order, like protoc does).
///
/// ## Type mapping
/// | Swift | protobuf |
/// | --- | --- |
/// | `Bool` | `bool` |
/// | `Int`, `Int64`, `Int32`, `Int16`, `Int8` | `int64` / `int32`: two's-complement varint (a negative value takes 10 bytes) |
/// | `UInt`, `UInt64`, `UInt32`, `UInt16`, `UInt8` | `uint64` / `uint32` |
/// | `ZigZag<Int32>`, `ZigZag<Int64>` (or `@ZigZag var`) | `sint32` / `sint64` |
/// | `Fixed<UInt32>`, `Fixed<Int32>`, `Fixed<UInt64>`, `Fixed<Int64>` (or `@Fixed var`) | `fixed32` / `sfixed32` / `fixed64` / `sfixed64` |
/// | `Float`, `Double` | `float` (fixed32), `double` (fixed64) |
/// | `String` | `string` (UTF-8, validated on decode) |
/// | `Data`, `[UInt8]` | `bytes` |
/// | `UUID` | `bytes` holding the 16 raw bytes (an absent UUID decodes as all zeros) |
/// | `Date` | embedded `google.protobuf.Timestamp {int64 seconds = 1; int32 nanos = 2}`, normalized so nanos is in `0..<1e9`; sub-microsecond precision is limited by `Date`'s `Double` (a Timestamp of whole milliseconds or microseconds re-encodes exactly) |
/// | a `Codable` struct/class | embedded message (length-delimited) |
/// | `Optional<T>` | field with explicit presence (proto3 `optional`) |
/// | `[T]` | `repeated T`: packed for numbers and bools, one record per element for strings, bytes and messages; `[[T]]` is rejected |
/// | `[K: V]` | `map<K, V>`: one entry message per pair (`key = 1`, `value = 2`, both always written); `K` is `String`, an integer type or `Bool` |
/// | enum with `String` / `Int` raw values | `string` / varint (Codable's `RawRepresentable` default) |
///
/// ## proto3 semantics
/// - A non-optional scalar equal to its default (0, false, "", empty bytes, empty array or map)
///   is not written, so output matches other protobuf implementations byte for byte. Floats use a
///   bitwise check, so `-0.0` is written.
/// - A present optional is always written, even when it equals the default; `nil` writes nothing.
/// - A non-optional nested message (including `Date`) is always written, even when all its fields
///   are defaults (as its tag and a zero length).
/// - Maps are written in a fixed key order, so output is deterministic and byte-identical to
///   Python protobuf's (upb) `SerializeToString(deterministic=True)`: integer keys descending by
///   their bit pattern read as unsigned (negative keys first, 0 last); string keys ascending by
///   UTF-8 bytes except that a key that is a prefix of another follows it ("" last); `true` first.
///   (Other implementations, e.g. C++, order keys differently; any order decodes the same.)
/// - Decoding: an absent scalar is its default, an absent message decodes from an empty message
///   (all defaults; an absent `Date` is 1970-01-01), `decodeIfPresent` returns nil and `contains`
///   is false for absent fields. Unknown fields (wire types 0, 1, 2, 5) are skipped; groups are
///   rejected. Repeated scalars are accepted packed, unpacked, or mixed. A scalar or message field
///   seen more than once: the last occurrence wins (messages are not merged).
///
/// ## Malformed input
/// Every malformed input (truncation, over-long varints, lengths past the end, wrong wire types,
/// integers out of range for the Swift type, invalid UTF-8, field number 0, nesting deeper than
/// ``ProtobufDecoder/Limits/maxDepth``, input larger than ``ProtobufDecoder/Limits/maxMessageSize``)
/// throws a `DecodingError` whose context carries the coding path. The decoder never traps and
/// never allocates more than the input's size justifies.
///
/// Unsupported: custom types that encode through unkeyed containers (use an `Array`), `nil` inside
/// arrays, `superEncoder()` without a key, proto2 groups.
import Foundation

/// Encodes `Encodable` messages to protobuf binary.
public struct ProtobufEncoder: Sendable {
    /// Made available to `encode(to:)` implementations.
    public var userInfo: [CodingUserInfoKey: any Sendable] = [:]
    /// Initial output capacity in bytes (the buffer grows as needed).
    public var initialCapacity: Int = 128

    /// An encoder with no user info and the default initial capacity.
    public init() {}

    /// Encodes a message (a type that encodes through a keyed container).
    public func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        let context = EncodeContext(capacity: initialCapacity, userInfo: userInfo)
        if value is any ProtoFieldEncodable {
            throw EncodingError.invalidValue(value, EncodingError.Context(
                codingPath: [], debugDescription: "a top-level protobuf value must be a message, not \(T.self)"))
        }
        try value.encode(to: ProtoEncoderImpl(context: context, field: 0, presence: false, depth: 0, pathCount: 0))
        context.closeFrames(deeperThan: 0)
        if let error = context.deferredError { throw error }
        return context.takeBuffer()
    }

    /// Encodes a message into `Data`.
    public func encodeToData<T: Encodable>(_ value: T) throws -> Data {
        Data(try encode(value))
    }
}

/// Decodes protobuf binary into `Decodable` messages.
public struct ProtobufDecoder: Sendable {
    /// Resource limits applied while decoding untrusted input.
    public struct Limits: Sendable, Hashable {
        /// Deepest allowed nesting of embedded messages below the top-level message (default 64).
        public var maxDepth: Int
        /// Largest accepted input in bytes (default 16 MiB; at most 4 GiB - 1).
        public var maxMessageSize: Int

        /// Limits of `maxDepth` nested messages and `maxMessageSize` bytes.
        public init(maxDepth: Int = 64, maxMessageSize: Int = 16 << 20) {
            self.maxDepth = maxDepth
            self.maxMessageSize = maxMessageSize
        }
    }

    /// How deep and how large an input may be; past either, decoding throws.
    public var limits: Limits
    /// Made available to `init(from:)` implementations.
    public var userInfo: [CodingUserInfoKey: any Sendable] = [:]

    /// A decoder with the default limits (depth 64, 16 MiB).
    public init() { limits = Limits() }
    /// A decoder with `limits`.
    public init(limits: Limits) { self.limits = limits }

    /// Shorthand for `limits.maxDepth`.
    public var maxDepth: Int {
        get { limits.maxDepth }
        set { limits.maxDepth = newValue }
    }

    /// Shorthand for `limits.maxMessageSize`.
    public var maxMessageSize: Int {
        get { limits.maxMessageSize }
        set { limits.maxMessageSize = newValue }
    }

    /// Decodes a message of type `T` from `bytes`.
    public func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try bytes.withUnsafeBytes { try decode(type, from: $0) }
    }

    /// Decodes a message of type `T` from `data`.
    public func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        try data.withUnsafeBytes { try decode(type, from: $0) }
    }

    /// Decodes from a buffer; the bytes are copied, so nothing refers to `buffer` afterwards.
    public func decode<T: Decodable>(_ type: T.Type, from buffer: UnsafeRawBufferPointer) throws -> T {
        let sizeLimit = Swift.min(Swift.max(limits.maxMessageSize, 0), Int(UInt32.max) - 1)
        guard buffer.count <= sizeLimit else {
            throw DecodingError.dataCorrupted(DecodingError.Context(
                codingPath: [], debugDescription: "message of \(buffer.count) bytes exceeds the limit of \(sizeLimit) bytes"))
        }
        if T.self is any ProtoFieldDecodable.Type {
            throw DecodingError.typeMismatch(T.self, DecodingError.Context(
                codingPath: [], debugDescription: "a top-level protobuf value must be a message, not \(T.self)"))
        }
        let depthLimit = Swift.min(Swift.max(limits.maxDepth, 0), Int(UInt16.max) / 4)
        let context = DecodeContext(copying: buffer, maxDepth: depthLimit, userInfo: userInfo)
        let decoder = ProtoDecoderImpl(context: context, range: 0..<buffer.count, field: 0, depth: 0, pathCount: 0)
        return try T(from: decoder)
    }
}
