// Scalar field types: how each Swift primitive maps to a protobuf wire type, its proto3 default,
// and its value encoding. Integer narrowing on decode is range checked and throws, never traps.
import Foundation

/// A value written as a single protobuf field value (`encodeField` handles tag and proto3 defaults).
protocol ProtoFieldEncodable {
    /// Writes this value as field `field`. `presence` forces writing even a default value
    /// (present optionals, map entries).
    func encodeField(_ context: EncodeContext, field: UInt32, presence: Bool, depth: Int) throws
}

/// A value read from the occurrences of one field (`FieldRef`), with proto3 defaults when absent.
protocol ProtoFieldDecodable {
    static func decodeField(_ ref: FieldRef) throws -> Self
}

/// A non-message value: numbers, bools, strings, bytes, and the integer wrappers.
protocol ProtoScalar: ProtoFieldEncodable, ProtoFieldDecodable {
    static var wireType: WireType { get }
    static var protoDefault: Self { get }
    var isProtoDefault: Bool { get }
    /// Appends the value without its tag (length-delimited values include their length prefix).
    func appendValue(to buffer: inout [UInt8])
    /// Reads one value whose wire type was already checked to be `wireType`.
    static func readValue(_ reader: inout WireReader) throws -> Self
}

extension ProtoScalar {
    @inline(__always) func encodeField(_ context: EncodeContext, field: UInt32, presence: Bool, depth: Int) throws {
        if !presence && isProtoDefault { return }
        context.buffer.appendTag(field, Self.wireType)
        appendValue(to: &context.buffer)
    }

    @inline(__always) static func decodeField(_ ref: FieldRef) throws -> Self {
        guard let occurrence = try ref.lastOccurrence() else { return protoDefault }
        return try read(ref, occurrence)
    }

    @inline(__always) static func read(_ ref: FieldRef, _ occurrence: FieldRef.Occurrence) throws -> Self {
        guard occurrence.wireType == wireType.rawValue else {
            throw WireError.mismatch(
                "field \(ref.field) has wire type \(occurrence.wireType), expected \(wireType.rawValue) for \(Self.self)")
        }
        var reader = WireReader(bytes: ref.context.bytes, position: occurrence.valueStart, end: ref.end)
        return try readValue(&reader)
    }
}

// MARK: Integers (varint; signed types are two's complement sign-extended to 64 bits)

extension ProtoScalar where Self: FixedWidthInteger & SignedInteger {
    static var wireType: WireType { .varint }
    static var protoDefault: Self { 0 }
    var isProtoDefault: Bool { self == 0 }
    @inline(__always) func appendValue(to buffer: inout [UInt8]) {
        buffer.appendVarint(UInt64(bitPattern: Int64(self)))
    }
    @inline(__always) static func readValue(_ reader: inout WireReader) throws -> Self {
        let raw = Int64(bitPattern: try reader.readVarint())
        guard let value = Self(exactly: raw) else {
            throw WireError.mismatch("varint \(raw) does not fit in \(Self.self)")
        }
        return value
    }
}

extension ProtoScalar where Self: FixedWidthInteger & UnsignedInteger {
    static var wireType: WireType { .varint }
    static var protoDefault: Self { 0 }
    var isProtoDefault: Bool { self == 0 }
    @inline(__always) func appendValue(to buffer: inout [UInt8]) { buffer.appendVarint(UInt64(self)) }
    @inline(__always) static func readValue(_ reader: inout WireReader) throws -> Self {
        let raw = try reader.readVarint()
        guard let value = Self(exactly: raw) else {
            throw WireError.mismatch("varint \(raw) does not fit in \(Self.self)")
        }
        return value
    }
}

extension Int: ProtoScalar {}
extension Int8: ProtoScalar {}
extension Int16: ProtoScalar {}
extension Int32: ProtoScalar {}
extension Int64: ProtoScalar {}
extension UInt: ProtoScalar {}
extension UInt8: ProtoScalar {}
extension UInt16: ProtoScalar {}
extension UInt32: ProtoScalar {}
extension UInt64: ProtoScalar {}

extension Bool: ProtoScalar {
    static var wireType: WireType { .varint }
    static var protoDefault: Bool { false }
    var isProtoDefault: Bool { !self }
    func appendValue(to buffer: inout [UInt8]) { buffer.append(self ? 1 : 0) }
    static func readValue(_ reader: inout WireReader) throws -> Bool { try reader.readVarint() != 0 }
}

// MARK: Floating point (the IEEE bits as fixed32 / fixed64; -0.0 is not the default, like protobuf's bitwise check)

/// `Float` (fixed32) and `Double` (fixed64).
protocol ProtoFloatingPoint: ProtoScalar, BinaryFloatingPoint {
    associatedtype BitPattern: FixedWidthInteger & UnsignedInteger
    var bitPattern: BitPattern { get }
    init(bitPattern: BitPattern)
}

extension ProtoFloatingPoint {
    static var wireType: WireType { BitPattern.bitWidth == 32 ? .fixed32 : .fixed64 }
    static var protoDefault: Self { 0 }
    var isProtoDefault: Bool { bitPattern == 0 }
    @inline(__always) func appendValue(to buffer: inout [UInt8]) { buffer.appendFixed(bitPattern) }
    @inline(__always) static func readValue(_ reader: inout WireReader) throws -> Self { Self(bitPattern: try reader.readFixed()) }
}

extension Float: ProtoFloatingPoint {}
extension Double: ProtoFloatingPoint {}

// MARK: Length-delimited scalars

extension String: ProtoScalar {
    static var wireType: WireType { .lengthDelimited }
    static var protoDefault: String { "" }
    var isProtoDefault: Bool { isEmpty }
    func appendValue(to buffer: inout [UInt8]) {
        let utf8 = self.utf8
        buffer.appendVarint(UInt64(utf8.count))
        buffer.append(contentsOf: utf8)
    }
    static func readValue(_ reader: inout WireReader) throws -> String {
        let range = try reader.readLengthDelimited()
        let raw = UnsafeBufferPointer(start: reader.bytes + range.lowerBound, count: range.count)
        // ASCII is valid UTF-8: skip the (unspecialized, slower) generic validation.
        var ascii: UInt8 = 0
        for byte in raw { ascii |= byte }
        if ascii < 0x80 { return String(decoding: raw, as: UTF8.self) }
        guard let string = String(validating: raw, as: UTF8.self) else {
            throw WireError.corrupted("string field is not valid UTF-8")
        }
        return string
    }
}

extension Data: ProtoScalar {
    static var wireType: WireType { .lengthDelimited }
    static var protoDefault: Data { Data() }
    var isProtoDefault: Bool { isEmpty }
    func appendValue(to buffer: inout [UInt8]) {
        buffer.appendVarint(UInt64(count))
        buffer.append(contentsOf: self)
    }
    static func readValue(_ reader: inout WireReader) throws -> Data {
        let range = try reader.readLengthDelimited()
        return Data(bytes: reader.bytes + range.lowerBound, count: range.count)
    }
}

/// `[UInt8]` is `bytes`; only used through `Array`'s field conformance.
enum ByteArray {
    static func append(_ bytes: [UInt8], to buffer: inout [UInt8]) {
        buffer.appendVarint(UInt64(bytes.count))
        buffer.append(contentsOf: bytes)
    }
    static func read(_ reader: inout WireReader) throws -> [UInt8] {
        let range = try reader.readLengthDelimited()
        return Array(UnsafeBufferPointer(start: reader.bytes + range.lowerBound, count: range.count))
    }
}

/// `UUID` is `bytes` holding its 16 raw bytes. An absent UUID decodes as all zeros.
extension UUID: ProtoScalar {
    static var wireType: WireType { .lengthDelimited }
    static var protoDefault: UUID { UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)) }
    var isProtoDefault: Bool { false }
    func appendValue(to buffer: inout [UInt8]) {
        buffer.append(16)
        withUnsafeBytes(of: uuid) { buffer.append(contentsOf: $0) }
    }
    static func readValue(_ reader: inout WireReader) throws -> UUID {
        let range = try reader.readLengthDelimited()
        guard range.count == 16 else { throw WireError.corrupted("UUID must be 16 bytes, got \(range.count)") }
        var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &uuid) { dst in
            dst.copyMemory(from: UnsafeRawBufferPointer(start: reader.bytes + range.lowerBound, count: 16))
        }
        return UUID(uuid: uuid)
    }
}

// MARK: Map keys
//
// Maps are written in a fixed order so output is deterministic and byte-identical to Python's
// protobuf (upb) `SerializeToString(deterministic=True)`, the reference for our interop tests:
// integer keys in descending order of their two's-complement bit pattern read as unsigned (so
// negative keys first, then positive ones from largest down, 0 last); string keys ascending by
// UTF-8 bytes, except that a key that is a prefix of another comes after it ("xy" before "x",
// "" last); `true` before `false`.

protocol ProtoMapKey: ProtoScalar {
    func protoPrecedes(_ other: Self) -> Bool
}

extension ProtoMapKey where Self: FixedWidthInteger {
    func protoPrecedes(_ other: Self) -> Bool {
        UInt64(truncatingIfNeeded: self) > UInt64(truncatingIfNeeded: other)
    }
}

extension Int: ProtoMapKey {}
extension Int8: ProtoMapKey {}
extension Int16: ProtoMapKey {}
extension Int32: ProtoMapKey {}
extension Int64: ProtoMapKey {}
extension UInt: ProtoMapKey {}
extension UInt8: ProtoMapKey {}
extension UInt16: ProtoMapKey {}
extension UInt32: ProtoMapKey {}
extension UInt64: ProtoMapKey {}
extension Bool: ProtoMapKey {
    func protoPrecedes(_ other: Bool) -> Bool { self && !other }
}
extension String: ProtoMapKey {
    func protoPrecedes(_ other: String) -> Bool {
        var left = utf8.makeIterator()
        var right = other.utf8.makeIterator()
        while true {
            switch (left.next(), right.next()) {
            case let (a?, b?):
                if a != b { return a < b }
            case (_?, nil): return true  // `other` is a proper prefix of `self`: longer first
            case (nil, _): return false
            }
        }
    }
}
