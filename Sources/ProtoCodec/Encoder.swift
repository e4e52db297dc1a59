// The `Encoder` and its containers. Everything is appended to one growing byte buffer in the
// shared `EncodeContext`; a nested message reserves one length byte and is back-patched (shifting
// its payload when the length needs more bytes) once its `encode(to:)` returns.

struct ProtoEncoderImpl: Encoder {
    let context: EncodeContext
    /// 0: message mode (the top level); otherwise the field number this encoder stands for.
    let field: UInt32
    let presence: Bool
    /// Depth of the message that holds `field` (or of the message itself in message mode).
    let depth: Int32
    let pathCount: Int32

    init(context: EncodeContext, field: UInt32, presence: Bool, depth: Int, pathCount: Int) {
        self.context = context
        self.field = field
        self.presence = presence
        self.depth = Int32(truncatingIfNeeded: depth)
        self.pathCount = Int32(truncatingIfNeeded: pathCount)
    }

    var codingPath: [any CodingKey] { Array(context.path.prefix(Int(pathCount))) }
    var userInfo: [CodingUserInfoKey: Any] { context.userInfo }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        var messageDepth = Int(depth)
        if field != 0 {
            messageDepth += 1
            context.openMessage(field: field, depth: messageDepth)
        }
        return KeyedEncodingContainer(ProtoKeyedEncodingContainer<Key>(
            context: context, depth: messageDepth, pathCount: Int(pathCount)))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        context.deferredError = context.deferredError ?? context.unsupported(
            "ProtoCodec encodes repeated fields from Swift Arrays only (custom unkeyed containers are unsupported)")
        return UnsupportedUnkeyedContainer(codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        ProtoSingleValueEncodingContainer(encoder: self)
    }
}

struct ProtoKeyedEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let context: EncodeContext
    let depth: Int
    let pathCount: Int

    var codingPath: [any CodingKey] { Array(context.path.prefix(pathCount)) }

    @inline(__always) private func number(_ key: Key, _ value: Any) throws -> UInt32 {
        guard let number = key.intValue, number > 0, number <= Int(maxFieldNumber) else {
            context.truncatePath(to: pathCount)
            throw context.invalidKey(key, Key.self, value: value)
        }
        return UInt32(number)
    }

    @inline(__always) private func scalar<S: ProtoScalar>(_ value: S, _ key: Key, presence: Bool) throws {
        let field = try number(key, value)
        context.closeFrames(deeperThan: depth)
        try value.encodeField(context, field: field, presence: presence, depth: depth)
    }

    mutating func encodeNil(forKey key: Key) throws {}

    mutating func encode(_ value: Bool, forKey key: Key) throws { try scalar(value, key, presence: false) }
    mutating func encode(_ value: String, forKey key: Key) throws { try scalar(value, key, presence: false) }
    mutating func encode(_ value: Double, forKey key: Key) throws { try scalar(value, key, presence: false) }
    mutating func encode(_ value: Float, forKey key: Key) throws { try scalar(value, key, presence: false) }
    mutating func encode(_ value: Int, forKey key: Key) throws { try scalar(value, key, presence: false) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try scalar(value, key, presence: false) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try scalar(value, key, presence: false) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try scalar(value, key, presence: false) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try scalar(value, key, presence: false) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try scalar(value, key, presence: false) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try scalar(value, key, presence: false) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try scalar(value, key, presence: false) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try scalar(value, key, presence: false) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try scalar(value, key, presence: false) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        let field = try number(key, value)
        context.closeFrames(deeperThan: depth)
        try context.encodeValue(value, field: field, presence: false, depth: depth, key: key, pathCount: pathCount)
    }

    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws {
        if let value { try scalar(value, key, presence: true) }
    }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws {
        if let value { try scalar(value, key, presence: true) }
    }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws {
        if let value { try scalar(value, key, presence: true) }
    }
    mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws {
        if let value { try scalar(value, key, presence: true) }
    }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws {
        if let value { try scalar(value, key, presence: true) }
    }
    mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws {
        if let value { try scalar(value, key, presence: true) }
    }
    mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws {
        if let value { try scalar(value, key, presence: true) }
    }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws {
        if let value { try scalar(value, key, presence: true) }
    }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws {
        if let value { try scalar(value, key, presence: true) }
    }
    mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws {
        if let value { try scalar(value, key, presence: true) }
    }
    mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws {
        if let value { try scalar(value, key, presence: true) }
    }
    mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws {
        if let value { try scalar(value, key, presence: true) }
    }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws {
        if let value { try scalar(value, key, presence: true) }
    }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws {
        if let value { try scalar(value, key, presence: true) }
    }

    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
        guard let value else { return }
        let field = try number(key, value)
        context.closeFrames(deeperThan: depth)
        try context.encodeValue(value, field: field, presence: true, depth: depth, key: key, pathCount: pathCount)
    }

    private func fieldEncoder(_ key: Key) -> ProtoEncoderImpl {
        context.closeFrames(deeperThan: depth)
        context.truncatePath(to: pathCount)
        guard let field = try? number(key, ()) else {
            context.deferredError = context.deferredError ?? context.invalidKey(key, Key.self, value: ())
            return ProtoEncoderImpl(context: context, field: maxFieldNumber, presence: true, depth: depth, pathCount: pathCount)
        }
        context.path.append(key)
        return ProtoEncoderImpl(context: context, field: field, presence: true, depth: depth, pathCount: pathCount + 1)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        fieldEncoder(key).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        fieldEncoder(key).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        context.deferredError = context.deferredError ?? context.unsupported(
            "superEncoder() needs a key with a field number; use superEncoder(forKey:)")
        return ProtoEncoderImpl(context: context, field: maxFieldNumber, presence: true, depth: depth, pathCount: pathCount)
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder { fieldEncoder(key) }
}

struct ProtoSingleValueEncodingContainer: SingleValueEncodingContainer {
    let encoder: ProtoEncoderImpl

    var codingPath: [any CodingKey] { encoder.codingPath }
    private var context: EncodeContext { encoder.context }

    private func notAMessage(_ value: Any) -> EncodingError {
        EncodingError.invalidValue(value, EncodingError.Context(
            codingPath: codingPath, debugDescription: "a top-level protobuf value must be a message, not \(type(of: value))"))
    }

    @inline(__always) private func scalar<S: ProtoScalar>(_ value: S) throws {
        guard encoder.field != 0 else { throw notAMessage(value) }
        context.closeFrames(deeperThan: Int(encoder.depth))
        try value.encodeField(context, field: encoder.field, presence: encoder.presence, depth: Int(encoder.depth))
    }

    mutating func encodeNil() throws {
        guard encoder.field != 0 else { throw notAMessage(Optional<Int>.none as Any) }
    }

    mutating func encode(_ value: Bool) throws { try scalar(value) }
    mutating func encode(_ value: String) throws { try scalar(value) }
    mutating func encode(_ value: Double) throws { try scalar(value) }
    mutating func encode(_ value: Float) throws { try scalar(value) }
    mutating func encode(_ value: Int) throws { try scalar(value) }
    mutating func encode(_ value: Int8) throws { try scalar(value) }
    mutating func encode(_ value: Int16) throws { try scalar(value) }
    mutating func encode(_ value: Int32) throws { try scalar(value) }
    mutating func encode(_ value: Int64) throws { try scalar(value) }
    mutating func encode(_ value: UInt) throws { try scalar(value) }
    mutating func encode(_ value: UInt8) throws { try scalar(value) }
    mutating func encode(_ value: UInt16) throws { try scalar(value) }
    mutating func encode(_ value: UInt32) throws { try scalar(value) }
    mutating func encode(_ value: UInt64) throws { try scalar(value) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        if encoder.field == 0 {
            // A wrapper around a message at the top level: encode the message itself.
            if value is any ProtoFieldEncodable { throw notAMessage(value) }
            try value.encode(to: encoder)
            return
        }
        try context.encodeValue(
            value, field: encoder.field, presence: encoder.presence, depth: Int(encoder.depth),
            key: nil, pathCount: Int(encoder.pathCount))
    }
}

struct UnsupportedUnkeyedContainer: UnkeyedEncodingContainer {
    let codingPath: [any CodingKey]
    var count: Int { 0 }

    private func fail(_ value: Any) -> EncodingError {
        EncodingError.invalidValue(value, EncodingError.Context(
            codingPath: codingPath, debugDescription: "custom unkeyed containers are unsupported; use a Swift Array"))
    }

    mutating func encodeNil() throws { throw fail(()) }
    mutating func encode<T: Encodable>(_ value: T) throws { throw fail(value) }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let context = EncodeContext(capacity: 0, userInfo: [:])
        return KeyedEncodingContainer(ProtoKeyedEncodingContainer<NestedKey>(context: context, depth: 0, pathCount: 0))
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { self }
    mutating func superEncoder() -> any Encoder {
        ProtoEncoderImpl(context: EncodeContext(capacity: 0, userInfo: [:]), field: 0, presence: false, depth: 0, pathCount: 0)
    }
}
