// Lists the CodingKeys a message type encodes, so ContractGoldenTests can send contracts.py every
// Swift field number: a field only the Swift type has then fails the test even when its fixture
// leaves it at the default (which protobuf does not write).

/// The top-level CodingKeys `value.encode(to:)` uses, as field number -> Swift name. Every key
/// counts, nil optionals and default values too; nested values are not encoded.
func codingKeys(of value: some Encodable) throws -> [Int: String] {
    let recorder = KeyRecorder()
    try value.encode(to: recorder)
    return recorder.keys
}

/// An `Encoder` that keeps the keys it is given and throws the values away.
private final class KeyRecorder: Encoder {
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] = [:]
    /// intValue (-1 for a key without one) -> stringValue.
    var keys: [Int: String] = [:]

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(RecordingContainer<Key>(recorder: self))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        preconditionFailure("a protobuf message encodes through a keyed container, not an unkeyed one")
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        preconditionFailure("a protobuf message encodes through a keyed container, not a single value")
    }
}

private struct RecordingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let recorder: KeyRecorder
    var codingPath: [any CodingKey] { [] }

    private func note(_ key: Key) { recorder.keys[key.intValue ?? -1] = key.stringValue }

    mutating func encodeNil(forKey key: Key) { note(key) }
    mutating func encode(_ value: Bool, forKey key: Key) { note(key) }
    mutating func encode(_ value: String, forKey key: Key) { note(key) }
    mutating func encode(_ value: Double, forKey key: Key) { note(key) }
    mutating func encode(_ value: Float, forKey key: Key) { note(key) }
    mutating func encode(_ value: Int, forKey key: Key) { note(key) }
    mutating func encode(_ value: Int8, forKey key: Key) { note(key) }
    mutating func encode(_ value: Int16, forKey key: Key) { note(key) }
    mutating func encode(_ value: Int32, forKey key: Key) { note(key) }
    mutating func encode(_ value: Int64, forKey key: Key) { note(key) }
    mutating func encode(_ value: UInt, forKey key: Key) { note(key) }
    mutating func encode(_ value: UInt8, forKey key: Key) { note(key) }
    mutating func encode(_ value: UInt16, forKey key: Key) { note(key) }
    mutating func encode(_ value: UInt32, forKey key: Key) { note(key) }
    mutating func encode(_ value: UInt64, forKey key: Key) { note(key) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) { note(key) }

    // The default encodeIfPresent skips nil; a nil optional is still a field of the type.
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) { note(key) }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) { note(key) }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) { note(key) }
    mutating func encodeIfPresent(_ value: Float?, forKey key: Key) { note(key) }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) { note(key) }
    mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) { note(key) }
    mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) { note(key) }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) { note(key) }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) { note(key) }
    mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) { note(key) }
    mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) { note(key) }
    mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) { note(key) }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) { note(key) }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) { note(key) }
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) { note(key) }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        note(key)
        return KeyRecorder().container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        preconditionFailure("\(key.stringValue): ProtoCodec has no mapping for a hand-written nested unkeyed container")
    }

    mutating func superEncoder() -> any Encoder { KeyRecorder() }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        note(key)
        return KeyRecorder()
    }
}
