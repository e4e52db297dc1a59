// Optionals, repeated fields (Arrays), maps (Dictionaries) and google.protobuf.Timestamp (Date).
import Foundation

/// Coding key for an element of a repeated field or a map value in coding paths.
struct IndexKey: CodingKey {
    let stringValue: String
    let intValue: Int?
    init(index: Int) {
        stringValue = "Index \(index)"
        intValue = index
    }
    init(mapKey: some Any) {
        stringValue = "\(mapKey)"
        intValue = nil
    }
    init?(stringValue: String) { self.stringValue = stringValue; intValue = nil }
    init?(intValue: Int) { self.init(index: intValue) }
}

/// Marks Arrays so that arrays of arrays (which protobuf cannot express) are rejected.
protocol ProtoArrayMarker {}
extension Array: ProtoArrayMarker {}

// MARK: Optional: nil writes nothing; a present value is written even when it is the default.

extension Optional: ProtoFieldEncodable where Wrapped: Encodable {
    func encodeField(_ context: EncodeContext, field: UInt32, presence: Bool, depth: Int) throws {
        guard let value = self else { return }
        try context.encodeValue(value, field: field, presence: true, depth: depth, key: nil, pathCount: context.path.count)
    }
}

extension Optional: ProtoFieldDecodable where Wrapped: Decodable {
    static func decodeField(_ ref: FieldRef) throws -> Optional {
        guard try ref.lastOccurrence() != nil else { return nil }
        return try ref.context.decodeValue(Wrapped.self, ref: ref, key: nil, pathCount: ref.context.path.count)
    }
}

// MARK: Arrays: packed numbers and bools; repeated strings, bytes and messages; [UInt8] is bytes.

extension Array: ProtoFieldEncodable where Element: Encodable {
    func encodeField(_ context: EncodeContext, field: UInt32, presence: Bool, depth: Int) throws {
        if Element.self == UInt8.self {
            // Same type (checked above), so the cast is an identity.
            let bytes = unsafeBitCast(self, to: [UInt8].self)
            if bytes.isEmpty && !presence { return }
            context.buffer.appendTag(field, .lengthDelimited)
            ByteArray.append(bytes, to: &context.buffer)
            return
        }
        if isEmpty { return }
        if let scalarType = Element.self as? any ProtoScalar.Type {
            try encodeScalars(scalarType, context, field: field)
            return
        }
        if Element.self is any ProtoArrayMarker.Type {
            throw context.unsupported("arrays of arrays cannot be encoded as protobuf", value: self)
        }
        let pathCount = context.path.count
        for (index, element) in enumerated() {
            try context.encodeValue(
                element, field: field, presence: true, depth: depth, key: IndexKey(index: index), pathCount: pathCount)
        }
    }

    private func encodeScalars<S: ProtoScalar>(_: S.Type, _ context: EncodeContext, field: UInt32) throws {
        guard Element.self == S.self else { return }
        let values = unsafeBitCast(self, to: [S].self)  // identity: Element is S
        if S.wireType == .lengthDelimited {
            for value in values {
                context.buffer.appendTag(field, .lengthDelimited)
                value.appendValue(to: &context.buffer)
            }
            return
        }
        context.buffer.appendTag(field, .lengthDelimited)
        let lengthAt = context.buffer.count
        context.buffer.append(0)
        for value in values { value.appendValue(to: &context.buffer) }
        context.buffer.patchLength(placeholderAt: lengthAt)
    }
}

extension Array: ProtoFieldDecodable where Element: Decodable {
    static func decodeField(_ ref: FieldRef) throws -> Array {
        if Element.self == UInt8.self {
            guard let occurrence = try ref.lastOccurrence() else { return [] }
            guard occurrence.wireType == WireType.lengthDelimited.rawValue else {
                throw WireError.mismatch("field \(ref.field) has wire type \(occurrence.wireType), expected 2 (bytes)")
            }
            var reader = WireReader(bytes: ref.context.bytes, position: occurrence.valueStart, end: ref.end)
            return unsafeBitCast(try ByteArray.read(&reader), to: Array.self)  // identity: Element is UInt8
        }
        if let scalarType = Element.self as? any ProtoScalar.Type {
            return try decodeScalars(scalarType, ref)
        }
        var result: [Element] = []
        let pathCount = ref.context.path.count
        try ref.forEachOccurrence { _, record, _ in
            let element = try ref.context.decodeValue(
                Element.self, ref: ref.occurrence(record), key: IndexKey(index: result.count), pathCount: pathCount)
            result.append(element)
        }
        return result
    }

    private static func decodeScalars<S: ProtoScalar>(_: S.Type, _ ref: FieldRef) throws -> Array {
        var values: [S] = []
        let packable = S.wireType != .lengthDelimited
        try ref.forEachOccurrence { wireType, record, valueStart in
            var reader = WireReader(bytes: ref.context.bytes, position: valueStart, end: record.upperBound)
            if wireType == S.wireType.rawValue {
                values.append(try S.readValue(&reader))
            } else if packable && wireType == WireType.lengthDelimited.rawValue {
                let payload = try reader.readLengthDelimited()
                if values.isEmpty {
                    // At most one element per payload byte: never reserve more than the input holds.
                    let minimumSize = S.wireType == .fixed32 ? 4 : S.wireType == .fixed64 ? 8 : 1
                    values.reserveCapacity(payload.count / minimumSize)
                }
                var inner = WireReader(bytes: ref.context.bytes, position: payload.lowerBound, end: payload.upperBound)
                while !inner.isAtEnd { values.append(try S.readValue(&inner)) }
            } else {
                throw WireError.mismatch(
                    "repeated field \(ref.field) has wire type \(wireType), expected \(S.wireType.rawValue) for \(S.self)")
            }
        }
        guard Element.self == S.self else { throw WireError.mismatch("cannot decode \(Array.self)") }
        return unsafeBitCast(values, to: Array.self)  // identity: Element is S
    }
}

// MARK: Maps: one length-delimited entry message per pair {key = 1; value = 2}, sorted by key.

extension Dictionary: ProtoFieldEncodable where Key: Encodable, Value: Encodable {
    func encodeField(_ context: EncodeContext, field: UInt32, presence: Bool, depth: Int) throws {
        if isEmpty { return }
        guard let keyType = Key.self as? any ProtoMapKey.Type else {
            throw context.unsupported("protobuf map keys must be String, an integer type or Bool, not \(Key.self)", value: self)
        }
        try encodeEntries(keyType, context, field: field, depth: depth)
    }

    private func encodeEntries<K: ProtoMapKey>(_: K.Type, _ context: EncodeContext, field: UInt32, depth: Int) throws {
        var entries: [(key: K, value: Value)] = []
        entries.reserveCapacity(count)
        for (key, value) in self {
            guard let key = key as? K else { return }
            entries.append((key, value))
        }
        entries.sort { $0.key.protoPrecedes($1.key) }
        let pathCount = context.path.count
        for entry in entries {
            context.buffer.appendTag(field, .lengthDelimited)
            let lengthAt = context.buffer.count
            context.buffer.append(0)
            // Map entries always carry both key and value, even when they are defaults.
            try entry.key.encodeField(context, field: 1, presence: true, depth: depth + 1)
            try context.encodeValue(
                entry.value, field: 2, presence: true, depth: depth + 1, key: IndexKey(mapKey: entry.key),
                pathCount: pathCount)
            context.buffer.patchLength(placeholderAt: lengthAt)
        }
    }
}

extension Dictionary: ProtoFieldDecodable where Key: Decodable, Value: Decodable {
    static func decodeField(_ ref: FieldRef) throws -> Dictionary {
        var result: [Key: Value] = [:]
        let context = ref.context
        let pathCount = context.path.count
        try ref.forEachOccurrence { wireType, record, valueStart in
            guard wireType == WireType.lengthDelimited.rawValue else {
                throw WireError.mismatch("map field \(ref.field) has wire type \(wireType), expected 2")
            }
            var reader = WireReader(bytes: context.bytes, position: valueStart, end: record.upperBound)
            let entry = try context.validatedMessage(try reader.readLengthDelimited(), depth: ref.depth + 1)
            let keyRef = FieldRef(
                context: context, start: entry.range.lowerBound, end: entry.range.upperBound, field: 1,
                depth: entry.depth, sorted: entry.sorted)
            let key = try context.decodeValue(Key.self, ref: keyRef, key: nil, pathCount: pathCount)
            result[key] = try context.decodeValue(
                Value.self, ref: keyRef.with(field: 2), key: IndexKey(mapKey: key), pathCount: pathCount)
        }
        return result
    }
}

// MARK: Date as google.protobuf.Timestamp {int64 seconds = 1; int32 nanos = 2}

/// Seconds between 1970-01-01 and Foundation's reference date 2001-01-01.
private let referenceDateOffset: Int64 = 978_307_200

extension Date: ProtoFieldEncodable, ProtoFieldDecodable {
    /// `nanos` rounded to a whole `unit`, when that differs and still decodes to `interval`.
    @inline(__always)
    static func coarser(_ nanos: Double, unit: Double, whole: Double, interval: Double) -> Double? {
        let coarser = (nanos / unit).rounded() * unit
        return coarser != nanos && coarser < 1e9 && whole + coarser / 1e9 == interval ? coarser : nil
    }

    /// Normalized (seconds, nanos) with nanos in 0..<1_000_000_000, rounded to the nearest nanosecond,
    /// or to the nearest whole millisecond or microsecond when that decodes to this same `Date`.
    /// (A `Double` near today resolves only about 0.1 µs, so a Timestamp of whole milliseconds would
    /// otherwise come back a few tens of nanoseconds off after a decode and re-encode.)
    func timestampParts() -> (seconds: Int64, nanos: Int32)? {
        let interval = timeIntervalSinceReferenceDate
        guard interval.isFinite else { return nil }
        var whole = interval.rounded(.down)
        var nanos = ((interval - whole) * 1e9).rounded()
        if nanos >= 1e9 {
            whole += 1
            nanos -= 1e9
        }
        // Same arithmetic as `decodeField`, so the coarser value is taken only when it decodes to `self`.
        // (Two calls, not a loop over an array: this runs for every Date on the hot path.)
        if let coarser = Self.coarser(nanos, unit: 1e6, whole: whole, interval: interval) ?? Self.coarser(nanos, unit: 1e3, whole: whole, interval: interval) {
            nanos = coarser
        }
        guard let seconds = Int64(exactly: whole) else { return nil }
        let (unix, overflow) = seconds.addingReportingOverflow(referenceDateOffset)
        guard !overflow else { return nil }
        return (unix, Int32(nanos))
    }

    func encodeField(_ context: EncodeContext, field: UInt32, presence: Bool, depth: Int) throws {
        guard let (seconds, nanos) = timestampParts() else {
            throw context.unsupported("date \(self) cannot be represented as a google.protobuf.Timestamp", value: self)
        }
        context.buffer.appendTag(field, .lengthDelimited)
        let secondsBits = UInt64(bitPattern: seconds)
        let nanosBits = UInt64(nanos)
        let length = (seconds != 0 ? 1 + varintSize(secondsBits) : 0) + (nanos != 0 ? 1 + varintSize(nanosBits) : 0)
        context.buffer.appendVarint(UInt64(length))
        if seconds != 0 {
            context.buffer.appendTag(1, .varint)
            context.buffer.appendVarint(secondsBits)
        }
        if nanos != 0 {
            context.buffer.appendTag(2, .varint)
            context.buffer.appendVarint(nanosBits)
        }
    }

    static func decodeField(_ ref: FieldRef) throws -> Date {
        let message = try ref.context.messagePayload(ref)
        let secondsRef = FieldRef(
            context: ref.context, start: message.range.lowerBound, end: message.range.upperBound, field: 1,
            depth: message.depth, sorted: message.sorted)
        let seconds = try Int64.decodeField(secondsRef)
        let nanos = try Int32.decodeField(secondsRef.with(field: 2))
        let (sinceReference, overflow) = seconds.subtractingReportingOverflow(referenceDateOffset)
        guard !overflow else { throw WireError.corrupted("timestamp seconds \(seconds) out of range") }
        return Date(timeIntervalSinceReferenceDate: Double(sinceReference) + Double(nanos) / 1e9)
    }
}
