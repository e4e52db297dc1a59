// Decoder state shared by all containers of one decode call, and field lookup.

/// Owns a private copy of the input (so containers can never outlive their bytes) and the
/// coding-path stack.
final class DecodeContext {
    let bytes: UnsafeMutablePointer<UInt8>
    let count: Int
    let maxDepth: Int
    let userInfo: [CodingUserInfoKey: any Sendable]
    var path: [any CodingKey] = []

    init(copying input: UnsafeRawBufferPointer, maxDepth: Int, userInfo: [CodingUserInfoKey: any Sendable]) {
        count = input.count
        bytes = UnsafeMutablePointer<UInt8>.allocate(capacity: Swift.max(count, 1))
        if let base = input.baseAddress, count > 0 {
            bytes.initialize(from: base.assumingMemoryBound(to: UInt8.self), count: count)
        }
        self.maxDepth = maxDepth
        self.userInfo = userInfo
    }

    deinit { bytes.deallocate() }

    func codingPath(_ count: Int) -> [any CodingKey] { Array(path.prefix(count)) }

    /// Decodes field `ref.field` of the message in `ref` as `T`: scalars, collections, `Date`
    /// and `UUID` directly, anything else through a field-mode `Decoder` (usually a message).
    func decodeValue<T: Decodable>(_ type: T.Type, ref: FieldRef, key: (any CodingKey)?, pathCount: Int) throws -> T {
        if path.count > pathCount { path.removeLast(path.count - pathCount) }
        if let key { path.append(key) }
        defer { if path.count > pathCount { path.removeLast(path.count - pathCount) } }
        if let special = T.self as? any ProtoFieldDecodable.Type {
            do {
                return try decodeSpecial(special, ref: ref)
            } catch let error as WireError {
                throw error.decodingError(path: path, type: T.self)
            }
        }
        let decoder = ProtoDecoderImpl(
            context: self, range: ref.start..<ref.end, field: ref.field, depth: ref.depth, pathCount: path.count)
        return try T(from: decoder)
    }

    private func decodeSpecial<F: ProtoFieldDecodable, T>(_ type: F.Type, ref: FieldRef) throws -> T {
        guard let value = try F.decodeField(ref) as? T else {
            throw WireError.mismatch("cannot decode \(T.self)")
        }
        return value
    }

    /// Payload range of a nested message field (last occurrence wins), or an empty range when
    /// absent; checks the depth limit and validates the payload's structure.
    func messagePayload(_ ref: FieldRef) throws -> (range: Range<Int>, depth: Int, sorted: Bool) {
        var range = ref.end..<ref.end
        if let occurrence = try ref.lastOccurrence() {
            guard occurrence.wireType == WireType.lengthDelimited.rawValue else {
                throw WireError.mismatch(
                    "field \(ref.field) has wire type \(occurrence.wireType), expected 2 (embedded message)")
            }
            var reader = WireReader(bytes: bytes, position: occurrence.valueStart, end: ref.end)
            range = try reader.readLengthDelimited()
        }
        return try validatedMessage(range, depth: ref.depth + 1)
    }

    func validatedMessage(_ range: Range<Int>, depth: Int) throws -> (range: Range<Int>, depth: Int, sorted: Bool) {
        guard depth <= maxDepth else {
            throw WireError.corrupted("message nesting deeper than the limit of \(maxDepth)")
        }
        let sorted = try WireReader.validate(bytes: bytes, range: range)
        return (range, depth, sorted)
    }
}

/// One field (by number) of a message occupying `start..<end` of the input; the range was
/// validated when its message was opened. A single occurrence can be addressed by giving the
/// range of just that record.
struct FieldRef {
    struct Occurrence {
        var wireType: UInt8
        /// Offset of the value (for length-delimited values, of its length prefix).
        var valueStart: Int
    }

    let context: DecodeContext
    let start: Int
    let end: Int
    let field: UInt32
    /// Nesting depth of the message that holds this field (top level = 0).
    let depth: Int
    /// Field numbers in the range never decrease, so a scan can stop early.
    let sorted: Bool

    /// The last occurrence of the field ("last one wins"), or nil when absent.
    @inline(__always) func lastOccurrence() throws -> Occurrence? {
        var reader = WireReader(bytes: context.bytes, position: start, end: end)
        var found: Occurrence?
        while !reader.isAtEnd {
            let (number, wireType) = try reader.readValidatedTag()
            if number == field {
                found = Occurrence(wireType: wireType, valueStart: reader.position)
            } else if sorted && number > field {
                break
            }
            try reader.skip(wireType)
        }
        return found
    }

    /// Calls `body` for every occurrence in order with its wire type, the range of the whole
    /// record (tag and value, usable as a single-occurrence `FieldRef`) and the value's offset.
    func forEachOccurrence(_ body: (UInt8, Range<Int>, Int) throws -> Void) throws {
        var reader = WireReader(bytes: context.bytes, position: start, end: end)
        while !reader.isAtEnd {
            let tagStart = reader.position
            let (number, wireType) = try reader.readValidatedTag()
            let valueStart = reader.position
            try reader.skip(wireType)
            if number == field {
                try body(wireType, tagStart..<reader.position, valueStart)
            } else if sorted && number > field {
                break
            }
        }
    }

    /// The single occurrence in `record` (a range returned by `forEachOccurrence`).
    func occurrence(_ record: Range<Int>) -> FieldRef {
        FieldRef(context: context, start: record.lowerBound, end: record.upperBound, field: field, depth: depth, sorted: true)
    }

    func with(field: UInt32) -> FieldRef {
        FieldRef(context: context, start: start, end: end, field: field, depth: depth, sorted: sorted)
    }
}
