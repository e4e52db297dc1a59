import GatehouseContracts
import GatehouseSupport
import ProtoCodec

/// The protocol version this build speaks. A server answers any other version with
/// `unsupported_version`. See proto/PROTOCOL.md for how it evolves.
public let rpcProtocolVersion: UInt32 = 1

extension RequestHeader {
    /// Finds field 2 (the request id) in a header that does not decode as a whole, so the server
    /// can still answer `malformed_request`. Returns nil when it cannot be read.
    static func peekRequestID(_ bytes: [UInt8]) -> UInt64? {
        bytes.withUnsafeBytes { raw in
            var reader = WireReader(bytes: raw)
            while !reader.atEnd {
                guard let key = reader.varint() else { return nil }
                let field = key >> 3
                switch key & 7 {
                case 0:
                    guard let value = reader.varint() else { return nil }
                    if field == 2 { return value }
                case 1: reader.index += 8
                case 5: reader.index += 4
                case 2:
                    guard reader.lengthDelimited() != nil else { return nil }
                default: return nil
                }
            }
            return nil
        }
    }
}

// MARK: - Hand-written wire forms for the hot path
//
// The envelope headers are encoded and decoded on every call. `ProtobufEncoder`/`Decoder` go
// through `Codable` (several allocations each); these write and read the same proto3 bytes
// directly. Decoding falls back to `ProtobufDecoder` for anything unusual (unknown fields,
// another wire type, invalid UTF-8), so what is accepted or refused does not change.

/// Appends protobuf varints and tagged fields to a byte buffer.
struct WireWriter {
    let base: UnsafeMutableRawPointer
    let capacity: Int
    var count = 0

    mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            precondition(count < capacity)
            base.storeBytes(of: UInt8(truncatingIfNeeded: v) | 0x80, toByteOffset: count, as: UInt8.self)
            count += 1
            v >>= 7
        }
        precondition(count < capacity)
        base.storeBytes(of: UInt8(v), toByteOffset: count, as: UInt8.self)
        count += 1
    }

    /// A varint field; proto3 leaves out zero.
    mutating func field(_ number: UInt64, varint value: UInt64) {
        guard value != 0 else { return }
        varint(number << 3)
        varint(value)
    }

    /// A length-delimited string field; proto3 leaves out the empty string.
    mutating func field(_ number: UInt64, string: String) {
        var string = string
        string.withUTF8 { utf8 in field(number, bytes: UnsafeRawBufferPointer(utf8)) }
    }

    /// A length-delimited field of UTF-8 `bytes`; proto3 leaves out the empty string.
    mutating func field(_ number: UInt64, bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty else { return }
        varint(number << 3 | 2)
        varint(UInt64(bytes.count))
        precondition(count + bytes.count <= capacity)
        (base + count).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        count += bytes.count
    }
}

/// Reads protobuf varints from a byte buffer.
struct WireReader {
    let bytes: UnsafeRawBufferPointer
    var index = 0

    var atEnd: Bool { index >= bytes.count }

    mutating func varint() -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while index < bytes.count, shift < 64 {
            let b = bytes[index]
            index += 1
            result |= UInt64(b & 0x7F) << shift
            if b & 0x80 == 0 { return result }
            shift += 7
        }
        return nil
    }

    /// A length-delimited payload, as a slice of `bytes`.
    mutating func lengthDelimited() -> UnsafeRawBufferPointer? {
        guard let length = varint(), length <= UInt64(bytes.count - index) else { return nil }
        let start = index
        index += Int(length)
        return UnsafeRawBufferPointer(rebasing: bytes[start..<index])
    }
}

extension RequestHeader {
    /// Upper bound of the encoded size.
    private func maxEncodedSize(trace: TraceParent?) -> Int {
        40 + method.utf8.count + max(traceParent.utf8.count, trace == nil ? 0 : TraceParent.length)
    }

    /// Lends the encoded header to `body` without allocating (a stack buffer). `trace` is
    /// written as field 5 when `traceParent` is empty (no string is made for it).
    func withEncoded<R>(trace: TraceParent? = nil, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeTemporaryAllocation(byteCount: maxEncodedSize(trace: trace), alignment: 1) { buffer in
            var writer = WireWriter(base: buffer.baseAddress!, capacity: buffer.count)
            writer.field(1, varint: UInt64(version))
            writer.field(2, varint: requestID)
            writer.field(3, string: method)
            writer.field(4, varint: UInt64(timeoutMs))
            if traceParent.isEmpty, let trace {
                trace.withUTF8 { writer.field(5, bytes: $0) }
            } else {
                writer.field(5, string: traceParent)
            }
            return try body(UnsafeRawBufferPointer(start: buffer.baseAddress, count: writer.count))
        }
    }

    /// The encoded header (the same bytes `ProtobufEncoder` writes), with `trace` as in `withEncoded`.
    func encoded(trace: TraceParent? = nil) -> [UInt8] {
        withEncoded(trace: trace) { Array($0) }
    }

    /// Decodes a header: the common shape directly, anything else through `ProtobufDecoder`.
    static func decode(_ bytes: [UInt8]) throws -> RequestHeader {
        if let header = bytes.withUnsafeBytes({ fastDecode($0) }) { return header }
        return try ProtobufDecoder().decode(RequestHeader.self, from: bytes)
    }

    /// Nil when the bytes hold anything but fields 1–5 with their own wire types and valid UTF-8.
    static func fastDecode(_ bytes: UnsafeRawBufferPointer) -> RequestHeader? {
        var unused: TraceParent?
        return fastDecode(bytes, capturingTrace: false, trace: &unused)
    }

    /// As `fastDecode(_:)`, for the server: a valid `traceparent` in field 5 is parsed into
    /// `trace` and left out of the header (no string is made); any other field 5 is kept as text.
    static func fastDecode(_ bytes: UnsafeRawBufferPointer, trace: inout TraceParent?) -> RequestHeader? {
        fastDecode(bytes, capturingTrace: true, trace: &trace)
    }

    private static func fastDecode(_ bytes: UnsafeRawBufferPointer, capturingTrace: Bool, trace: inout TraceParent?) -> RequestHeader? {
        var header = RequestHeader(version: 0, requestID: 0, method: "", timeoutMs: 0, traceParent: "")
        var reader = WireReader(bytes: bytes)
        while !reader.atEnd {
            guard let key = reader.varint() else { return nil }
            switch key {
            case 1 << 3:
                guard let v = reader.varint(), let v32 = UInt32(exactly: v) else { return nil }
                header.version = v32
            case 2 << 3:
                guard let v = reader.varint() else { return nil }
                header.requestID = v
            case 3 << 3 | 2:
                guard let s = reader.lengthDelimited(), let string = String(validating: s, as: UTF8.self) else { return nil }
                header.method = string
            case 4 << 3:
                guard let v = reader.varint(), let v32 = UInt32(exactly: v) else { return nil }
                header.timeoutMs = v32
            case 5 << 3 | 2:
                guard let s = reader.lengthDelimited() else { return nil }
                if capturingTrace, let parsed = TraceParent(utf8: s) {
                    trace = parsed
                    header.traceParent = ""
                } else {
                    guard let string = String(validating: s, as: UTF8.self) else { return nil }
                    header.traceParent = string
                    trace = nil
                }
            default:
                return nil
            }
        }
        return header
    }
}

extension ReplyHeader {
    /// The encoded header: written directly for a success, through `ProtobufEncoder` for an error.
    func encoded() throws -> [UInt8] {
        guard error == nil else { return try ProtobufEncoder().encode(self) }
        return withUnsafeTemporaryAllocation(byteCount: 12, alignment: 1) { buffer in
            var writer = WireWriter(base: buffer.baseAddress!, capacity: buffer.count)
            writer.field(1, varint: requestID)
            return Array(UnsafeRawBufferPointer(start: buffer.baseAddress, count: writer.count))
        }
    }

    /// Decodes a header: a success (only field 1) directly, anything else through `ProtobufDecoder`.
    static func decode(_ bytes: UnsafeRawBufferPointer) throws -> ReplyHeader {
        var reader = WireReader(bytes: bytes)
        var requestID: UInt64 = 0
        var simple = true
        while !reader.atEnd {
            guard reader.varint() == 1 << 3, let v = reader.varint() else {
                simple = false
                break
            }
            requestID = v
        }
        if simple { return ReplyHeader(requestID: requestID, error: nil) }
        return try ProtobufDecoder().decode(ReplyHeader.self, from: bytes)
    }
}
