// Integer encodings other than the default varint: zigzag (sint32/sint64) and fixed-width
// (fixed32/fixed64/sfixed32/sfixed64). Both work as plain types (`var delta: ZigZag<Int64>`)
// and as property wrappers (`@ZigZag var delta: Int64`). With other coders (e.g. JSON) they
// encode as the bare wrapped number.

/// A number wrapper that other coders (JSON, …) read and write as the bare number;
/// `ProtobufEncoder` and `ProtobufDecoder` write and read the wire form of the wrapper itself.
public protocol BareNumberCodable: Codable {
    /// The wrapped number's type.
    associatedtype Value: Codable
    /// The number.
    var wrappedValue: Value { get }
    /// Wraps `value`.
    init(_ value: Value)
}

extension BareNumberCodable {
    /// Reads the bare number.
    public init(from decoder: any Decoder) throws {
        self.init(try decoder.singleValueContainer().decode(Value.self))
    }

    /// Writes the bare number.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(wrappedValue)
    }
}

/// Encodes a signed integer as a zigzag varint: `sint32` for types up to 32 bits, else `sint64`.
@propertyWrapper
public struct ZigZag<Value: FixedWidthInteger & SignedInteger & Codable & Sendable>: Sendable, Hashable, BareNumberCodable {
    /// The number, as Swift sees it.
    public var wrappedValue: Value
    /// Wraps `wrappedValue` (the property-wrapper form, `@ZigZag var`).
    public init(wrappedValue: Value) { self.wrappedValue = wrappedValue }
    /// Wraps `value` (the plain-type form, `ZigZag(-1)`).
    public init(_ value: Value) { self.wrappedValue = value }

}

/// Encodes an integer as fixed-width little-endian: `fixed32`/`sfixed32` for types up to
/// 32 bits, else `fixed64`/`sfixed64`.
@propertyWrapper
public struct Fixed<Value: FixedWidthInteger & Codable & Sendable>: Sendable, Hashable, BareNumberCodable {
    /// The number, as Swift sees it.
    public var wrappedValue: Value
    /// Wraps `wrappedValue` (the property-wrapper form, `@Fixed var`).
    public init(wrappedValue: Value) { self.wrappedValue = wrappedValue }
    /// Wraps `value` (the plain-type form, `Fixed(7)`).
    public init(_ value: Value) { self.wrappedValue = value }

}

extension ZigZag: ExpressibleByIntegerLiteral {
    /// Lets a literal stand for a `ZigZag` value: `var delta: ZigZag<Int64> = -1`.
    public init(integerLiteral value: Value.IntegerLiteralType) { self.wrappedValue = Value(integerLiteral: value) }
}

extension Fixed: ExpressibleByIntegerLiteral {
    /// Lets a literal stand for a `Fixed` value: `var id: Fixed<UInt64> = 7`.
    public init(integerLiteral value: Value.IntegerLiteralType) { self.wrappedValue = Value(integerLiteral: value) }
}

extension ZigZag: ProtoScalar {
    static var wireType: WireType { .varint }
    static var protoDefault: ZigZag { ZigZag(0) }
    var isProtoDefault: Bool { wrappedValue == 0 }
    func appendValue(to buffer: inout [UInt8]) {
        buffer.appendVarint(zigZagEncode(Int64(wrappedValue)))
    }
    static func readValue(_ reader: inout WireReader) throws -> ZigZag {
        let raw = try reader.readVarint()
        if Value.bitWidth <= 32 && raw > UInt64(UInt32.max) {
            throw WireError.mismatch("zigzag varint \(raw) does not fit in sint32")
        }
        guard let value = Value(exactly: zigZagDecode(raw)) else {
            throw WireError.mismatch("zigzag value \(zigZagDecode(raw)) does not fit in \(Value.self)")
        }
        return ZigZag(value)
    }
}

extension Fixed: ProtoScalar {
    static var wireType: WireType { Value.bitWidth <= 32 ? .fixed32 : .fixed64 }
    static var protoDefault: Fixed { Fixed(0) }
    var isProtoDefault: Bool { wrappedValue == 0 }
    func appendValue(to buffer: inout [UInt8]) {
        if Value.bitWidth <= 32 {
            // Signed values are sign-extended to 32 bits, then written as two's complement.
            buffer.appendFixed(UInt32(truncatingIfNeeded: wrappedValue))
        } else {
            buffer.appendFixed(UInt64(truncatingIfNeeded: wrappedValue))
        }
    }
    static func readValue(_ reader: inout WireReader) throws -> Fixed {
        let value: Value?
        if Value.bitWidth <= 32 {
            let raw = try reader.readFixed(UInt32.self)
            value = Value.isSigned ? Value(exactly: Int32(bitPattern: raw)) : Value(exactly: raw)
        } else {
            let raw = try reader.readFixed(UInt64.self)
            value = Value.isSigned ? Value(exactly: Int64(bitPattern: raw)) : Value(exactly: raw)
        }
        guard let value else { throw WireError.mismatch("fixed-width value does not fit in \(Value.self)") }
        return Fixed(value)
    }
}
