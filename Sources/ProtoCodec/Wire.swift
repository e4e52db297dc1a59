// Low-level protobuf wire format: tags, varints, fixed-width values, and a bounds-checked reader.

/// The four wire types this codec reads and writes (groups, 3 and 4, are rejected).
enum WireType: UInt8 {
    case varint = 0
    case fixed64 = 1
    case lengthDelimited = 2
    case fixed32 = 5
}

/// Largest field number protobuf allows.
let maxFieldNumber: UInt32 = (1 << 29) - 1

/// An internal decoding failure without a coding path; containers turn it into a `DecodingError`.
struct WireError: Error {
    enum Kind { case corrupted, typeMismatch }
    let kind: Kind
    let message: String
    static func corrupted(_ m: String) -> WireError { WireError(kind: .corrupted, message: m) }
    static func mismatch(_ m: String) -> WireError { WireError(kind: .typeMismatch, message: m) }

    func decodingError(path: [any CodingKey], type: Any.Type) -> DecodingError {
        let context = DecodingError.Context(codingPath: path, debugDescription: message)
        switch kind {
        case .corrupted: return .dataCorrupted(context)
        case .typeMismatch: return .typeMismatch(type, context)
        }
    }
}

@inline(__always) func varintSize(_ value: UInt64) -> Int {
    // 1 byte per started group of 7 significant bits; 0 still needs one byte.
    let bits = 64 - (value | 1).leadingZeroBitCount
    return (bits + 6) / 7
}

@inline(__always) func zigZagEncode(_ n: Int64) -> UInt64 { UInt64(bitPattern: (n << 1) ^ (n >> 63)) }
@inline(__always) func zigZagDecode(_ z: UInt64) -> Int64 { Int64(bitPattern: (z >> 1) ^ (0 &- (z & 1))) }

extension Array where Element == UInt8 {
    @inline(__always) mutating func appendVarint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        append(UInt8(truncatingIfNeeded: v))
    }

    @inline(__always) mutating func appendTag(_ field: UInt32, _ wireType: WireType) {
        appendVarint(UInt64(field) << 3 | UInt64(wireType.rawValue))
    }

    /// Appends a fixed32 (`UInt32`) or fixed64 (`UInt64`) value, little-endian.
    @inline(__always) mutating func appendFixed<Value: FixedWidthInteger & UnsignedInteger>(_ value: Value) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    /// Writes the length of everything after `position` (where one placeholder byte was reserved)
    /// as a varint, shifting the payload right when the length needs more than one byte.
    mutating func patchLength(placeholderAt position: Int) {
        let length = count - position - 1
        let size = varintSize(UInt64(length))
        if size > 1 {
            append(contentsOf: repeatElement(0, count: size - 1))
            withUnsafeMutableBufferPointer { buffer in
                guard let base = buffer.baseAddress else { return }
                (base + position + size).update(from: base + position + 1, count: length)
            }
        }
        var v = UInt64(length)
        for i in 0..<size {
            let byte = UInt8(truncatingIfNeeded: v & 0x7F)
            v >>= 7
            self[position + i] = i == size - 1 ? byte : byte | 0x80
        }
    }
}

/// A cursor over a byte range of the decoder's input. Every read checks bounds and throws.
struct WireReader {
    let bytes: UnsafePointer<UInt8>
    var position: Int
    let end: Int

    init(bytes: UnsafePointer<UInt8>, position: Int, end: Int) {
        self.bytes = bytes
        self.position = position
        self.end = end
    }

    var isAtEnd: Bool { position >= end }

    @inline(__always) mutating func readVarint() throws -> UInt64 {
        // Fast path: one byte.
        if position < end {
            let b = bytes[position]
            if b < 0x80 {
                position += 1
                return UInt64(b)
            }
        }
        return try readVarintSlow()
    }

    mutating func readVarintSlow() throws -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        for _ in 0..<10 {
            guard position < end else { throw WireError.corrupted("truncated varint") }
            let b = bytes[position]
            position += 1
            result |= UInt64(b & 0x7F) << shift
            if b < 0x80 { return result }
            shift += 7
        }
        throw WireError.corrupted("varint longer than 10 bytes")
    }

    /// Reads a fixed32 (`UInt32`) or fixed64 (`UInt64`) value.
    mutating func readFixed<Value: FixedWidthInteger & UnsignedInteger>(_: Value.Type = Value.self) throws -> Value {
        let size = MemoryLayout<Value>.size
        guard end - position >= size else { throw WireError.corrupted("truncated fixed\(Value.bitWidth) value") }
        let v = UnsafeRawPointer(bytes + position).loadUnaligned(as: Value.self)
        position += size
        return Value(littleEndian: v)
    }

    /// Reads a length prefix and checks that that many bytes remain; returns the payload range.
    mutating func readLengthDelimited() throws -> Range<Int> {
        let length = try readVarint()
        guard length <= UInt64(end - position) else {
            throw WireError.corrupted("length \(length) runs past the end of the message")
        }
        let start = position
        position += Int(length)
        return start..<position
    }

    /// Reads a tag; rejects field number 0, numbers above 2^29-1 and unsupported wire types.
    mutating func readTag() throws -> (field: UInt32, wireType: UInt8) {
        let tag = try readVarint()
        guard tag <= UInt64(UInt32.max) else { throw WireError.corrupted("tag \(tag) out of range") }
        let field = UInt32(truncatingIfNeeded: tag >> 3)
        let wireType = UInt8(truncatingIfNeeded: tag & 7)
        guard field != 0 else { throw WireError.corrupted("field number 0 is invalid") }
        switch wireType {
        case 0, 1, 2, 5: break
        case 3, 4: throw WireError.corrupted("groups (wire types 3 and 4) are not supported")
        default: throw WireError.corrupted("invalid wire type \(wireType)")
        }
        return (field, wireType)
    }

    /// Reads a tag inside a range that `validate` already accepted.
    @inline(__always) mutating func readValidatedTag() throws -> (field: UInt32, wireType: UInt8) {
        let tag = try readVarint()
        return (UInt32(truncatingIfNeeded: tag >> 3), UInt8(truncatingIfNeeded: tag & 7))
    }

    /// Skips a field value of the given wire type.
    @inline(__always) mutating func skip(_ wireType: UInt8) throws {
        switch wireType {
        case 0: _ = try readVarint()
        case 1:
            guard end - position >= 8 else { throw WireError.corrupted("truncated fixed64 value") }
            position += 8
        case 2: _ = try readLengthDelimited()
        case 5:
            guard end - position >= 4 else { throw WireError.corrupted("truncated fixed32 value") }
            position += 4
        default: throw WireError.corrupted("invalid wire type \(wireType)")
        }
    }

    /// Checks the structure of a whole message range in one pass without allocating.
    /// Returns whether field numbers never decrease (which lets lookups stop early).
    static func validate(bytes: UnsafePointer<UInt8>, range: Range<Int>) throws -> Bool {
        var reader = WireReader(bytes: bytes, position: range.lowerBound, end: range.upperBound)
        var previous: UInt32 = 0
        var sorted = true
        while !reader.isAtEnd {
            let (field, wireType) = try reader.readTag()
            if field < previous { sorted = false }
            previous = field
            try reader.skip(wireType)
        }
        return sorted
    }
}
