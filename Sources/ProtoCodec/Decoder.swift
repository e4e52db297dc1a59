// The `Decoder` and its containers. A decoder is either in message mode (its range is a message
// payload) or field mode (it stands for field `field` of the message in its range, and becomes a
// message or a scalar depending on which container the value asks for).

struct ProtoDecoderImpl: Decoder {
    let context: DecodeContext
    // Packed so the struct fits an existential's inline buffer (no allocation per decoder).
    let start: UInt32
    let end: UInt32
    /// 0: message mode; otherwise the field number this decoder stands for.
    let field: UInt32
    let depth: UInt16
    let pathCount: UInt16

    init(context: DecodeContext, range: Range<Int>, field: UInt32, depth: Int, pathCount: Int) {
        self.context = context
        self.start = UInt32(truncatingIfNeeded: range.lowerBound)
        self.end = UInt32(truncatingIfNeeded: range.upperBound)
        self.field = field
        self.depth = UInt16(truncatingIfNeeded: depth)
        self.pathCount = UInt16(truncatingIfNeeded: pathCount)
    }

    var codingPath: [any CodingKey] { context.codingPath(Int(pathCount)) }
    var userInfo: [CodingUserInfoKey: Any] { context.userInfo }

    var fieldRef: FieldRef {
        FieldRef(context: context, start: Int(start), end: Int(end), field: field, depth: Int(depth), sorted: false)
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        do {
            let message = field == 0
                ? try context.validatedMessage(Int(start)..<Int(end), depth: Int(depth))
                : try context.messagePayload(fieldRef)
            return KeyedDecodingContainer(ProtoKeyedDecodingContainer<Key>(
                context: context, start: message.range.lowerBound, end: message.range.upperBound,
                depth: message.depth, sorted: message.sorted, pathCount: Int(pathCount)))
        } catch let error as WireError {
            throw error.decodingError(path: codingPath, type: type)
        }
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw DecodingError.typeMismatch([Any].self, DecodingError.Context(
            codingPath: codingPath,
            debugDescription: "ProtoCodec decodes repeated fields into Swift Arrays only (custom unkeyed containers are unsupported)"))
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        ProtoSingleValueDecodingContainer(decoder: self)
    }
}

struct ProtoKeyedDecodingContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let context: DecodeContext
    let start: Int
    let end: Int
    let depth: Int
    let sorted: Bool
    let pathCount: Int

    var codingPath: [any CodingKey] { context.codingPath(pathCount) }

    var allKeys: [Key] {
        var numbers: [UInt32] = []
        var reader = WireReader(bytes: context.bytes, position: start, end: end)
        while !reader.isAtEnd {
            guard let (number, wireType) = try? reader.readTag(), (try? reader.skip(wireType)) != nil else { break }
            if !numbers.contains(number) { numbers.append(number) }
        }
        return numbers.compactMap { Key(intValue: Int($0)) }
    }

    @inline(__always) private func ref(_ key: Key) throws -> FieldRef {
        guard let number = key.intValue, number > 0, number <= Int(maxFieldNumber) else {
            throw DecodingError.dataCorrupted(DecodingError.Context(
                codingPath: codingPath + [key],
                debugDescription: "\(String(reflecting: Key.self)) key '\(key.stringValue)' has no protobuf field number: "
                    + "its intValue must be in 1...\(maxFieldNumber) (declare `enum CodingKeys: Int, CodingKey`)"))
        }
        return FieldRef(context: context, start: start, end: end, field: UInt32(number), depth: depth, sorted: sorted)
    }

    @inline(__always) private func scalar<S: ProtoScalar>(_ key: Key) throws -> S {
        let ref = try ref(key)
        do {
            return try S.decodeField(ref)
        } catch let error as WireError {
            throw error.decodingError(path: codingPath + [key], type: S.self)
        }
    }

    @inline(__always) private func scalarIfPresent<S: ProtoScalar>(_ key: Key) throws -> S? {
        let ref = try ref(key)
        do {
            guard let occurrence = try ref.lastOccurrence() else { return nil }
            return try S.read(ref, occurrence)
        } catch let error as WireError {
            throw error.decodingError(path: codingPath + [key], type: S.self)
        }
    }

    func contains(_ key: Key) -> Bool {
        guard let ref = try? ref(key), let occurrence = try? ref.lastOccurrence() else { return false }
        _ = occurrence
        return true
    }

    func decodeNil(forKey key: Key) throws -> Bool { !contains(key) }

    func decode(_: Bool.Type, forKey key: Key) throws -> Bool { try scalar(key) }
    func decode(_: String.Type, forKey key: Key) throws -> String { try scalar(key) }
    func decode(_: Double.Type, forKey key: Key) throws -> Double { try scalar(key) }
    func decode(_: Float.Type, forKey key: Key) throws -> Float { try scalar(key) }
    func decode(_: Int.Type, forKey key: Key) throws -> Int { try scalar(key) }
    func decode(_: Int8.Type, forKey key: Key) throws -> Int8 { try scalar(key) }
    func decode(_: Int16.Type, forKey key: Key) throws -> Int16 { try scalar(key) }
    func decode(_: Int32.Type, forKey key: Key) throws -> Int32 { try scalar(key) }
    func decode(_: Int64.Type, forKey key: Key) throws -> Int64 { try scalar(key) }
    func decode(_: UInt.Type, forKey key: Key) throws -> UInt { try scalar(key) }
    func decode(_: UInt8.Type, forKey key: Key) throws -> UInt8 { try scalar(key) }
    func decode(_: UInt16.Type, forKey key: Key) throws -> UInt16 { try scalar(key) }
    func decode(_: UInt32.Type, forKey key: Key) throws -> UInt32 { try scalar(key) }
    func decode(_: UInt64.Type, forKey key: Key) throws -> UInt64 { try scalar(key) }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        let ref = try ref(key)
        do {
            return try context.decodeValue(type, ref: ref, key: key, pathCount: pathCount)
        } catch let error as WireError {
            throw error.decodingError(path: codingPath + [key], type: type)
        }
    }

    func decodeIfPresent(_: Bool.Type, forKey key: Key) throws -> Bool? { try scalarIfPresent(key) }
    func decodeIfPresent(_: String.Type, forKey key: Key) throws -> String? { try scalarIfPresent(key) }
    func decodeIfPresent(_: Double.Type, forKey key: Key) throws -> Double? { try scalarIfPresent(key) }
    func decodeIfPresent(_: Float.Type, forKey key: Key) throws -> Float? { try scalarIfPresent(key) }
    func decodeIfPresent(_: Int.Type, forKey key: Key) throws -> Int? { try scalarIfPresent(key) }
    func decodeIfPresent(_: Int8.Type, forKey key: Key) throws -> Int8? { try scalarIfPresent(key) }
    func decodeIfPresent(_: Int16.Type, forKey key: Key) throws -> Int16? { try scalarIfPresent(key) }
    func decodeIfPresent(_: Int32.Type, forKey key: Key) throws -> Int32? { try scalarIfPresent(key) }
    func decodeIfPresent(_: Int64.Type, forKey key: Key) throws -> Int64? { try scalarIfPresent(key) }
    func decodeIfPresent(_: UInt.Type, forKey key: Key) throws -> UInt? { try scalarIfPresent(key) }
    func decodeIfPresent(_: UInt8.Type, forKey key: Key) throws -> UInt8? { try scalarIfPresent(key) }
    func decodeIfPresent(_: UInt16.Type, forKey key: Key) throws -> UInt16? { try scalarIfPresent(key) }
    func decodeIfPresent(_: UInt32.Type, forKey key: Key) throws -> UInt32? { try scalarIfPresent(key) }
    func decodeIfPresent(_: UInt64.Type, forKey key: Key) throws -> UInt64? { try scalarIfPresent(key) }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard contains(key) else { return nil }
        return try decode(type, forKey: key)
    }

    private func fieldDecoder(_ key: Key) throws -> ProtoDecoderImpl {
        let ref = try ref(key)
        if context.path.count > pathCount { context.path.removeLast(context.path.count - pathCount) }
        context.path.append(key)
        return ProtoDecoderImpl(
            context: context, range: start..<end, field: ref.field, depth: depth, pathCount: pathCount + 1)
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        try fieldDecoder(key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try fieldDecoder(key).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        throw DecodingError.dataCorrupted(DecodingError.Context(
            codingPath: codingPath, debugDescription: "superDecoder() needs a key with a field number; use superDecoder(forKey:)"))
    }

    func superDecoder(forKey key: Key) throws -> any Decoder { try fieldDecoder(key) }
}

struct ProtoSingleValueDecodingContainer: SingleValueDecodingContainer {
    let decoder: ProtoDecoderImpl

    var codingPath: [any CodingKey] { decoder.codingPath }

    private func notAMessage(_ type: Any.Type) -> DecodingError {
        DecodingError.typeMismatch(type, DecodingError.Context(
            codingPath: codingPath, debugDescription: "a top-level protobuf value must be a message, not \(type)"))
    }

    @inline(__always) private func scalar<S: ProtoScalar>() throws -> S {
        guard decoder.field != 0 else { throw notAMessage(S.self) }
        do {
            return try S.decodeField(decoder.fieldRef)
        } catch let error as WireError {
            throw error.decodingError(path: codingPath, type: S.self)
        }
    }

    func decodeNil() -> Bool {
        guard decoder.field != 0 else { return false }
        return (try? decoder.fieldRef.lastOccurrence()) == nil
    }

    func decode(_: Bool.Type) throws -> Bool { try scalar() }
    func decode(_: String.Type) throws -> String { try scalar() }
    func decode(_: Double.Type) throws -> Double { try scalar() }
    func decode(_: Float.Type) throws -> Float { try scalar() }
    func decode(_: Int.Type) throws -> Int { try scalar() }
    func decode(_: Int8.Type) throws -> Int8 { try scalar() }
    func decode(_: Int16.Type) throws -> Int16 { try scalar() }
    func decode(_: Int32.Type) throws -> Int32 { try scalar() }
    func decode(_: Int64.Type) throws -> Int64 { try scalar() }
    func decode(_: UInt.Type) throws -> UInt { try scalar() }
    func decode(_: UInt8.Type) throws -> UInt8 { try scalar() }
    func decode(_: UInt16.Type) throws -> UInt16 { try scalar() }
    func decode(_: UInt32.Type) throws -> UInt32 { try scalar() }
    func decode(_: UInt64.Type) throws -> UInt64 { try scalar() }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        if decoder.field == 0 {
            // A wrapper around a message at the top level: decode the message itself.
            if T.self is any ProtoFieldDecodable.Type { throw notAMessage(type) }
            return try T(from: decoder)
        }
        do {
            return try decoder.context.decodeValue(
                type, ref: decoder.fieldRef, key: nil, pathCount: Int(decoder.pathCount))
        } catch let error as WireError {
            throw error.decodingError(path: codingPath, type: type)
        }
    }
}
