/// The server's one JSON reader (RFC 8259), over UTF-8 bytes. Every server module reads JSON
/// text with it (the client library and the load generator keep their own on purpose):
///
/// - `JSONTree(parsing:options:)`: a whole value as a tree (numbers as written, members in
///   order): settings documents and their merge patches, custom claims.
/// - `objectMembers(in:options:)`: the members of a top-level object, each with the byte range
///   of its value's text, so a member can be passed on byte for byte (`PATCH /v1/me`'s
///   `settings`) or read again (an import line's `customClaims`).
/// - `flatStrings(_:maxMembers:)`: the fast path of the request bodies most requests carry
///   (`{"refreshToken":"…"}`): an object of strings and nulls only, else nil.
///
/// What it accepts is set by `Options`: nesting depth, size, repeated member names, and the two
/// things Foundation's reader takes that RFC 8259 does not (a comma before `}` or `]`, a byte
/// order mark). Strings are always checked strictly: valid UTF-8, no raw control character,
/// known escapes only, `\u` surrogates in pairs.
public enum JSONReader {
    /// What a reading accepts.
    public struct Options: Sendable, Hashable {
        /// What a member named twice in one object does.
        public enum RepeatedNames: Sendable, Hashable {
            /// The last value wins, at the place of the first (as Foundation reads them).
            case lastWins
            /// Refused: "repeated member name".
            case refused
        }

        /// The deepest nesting of arrays and objects (the top-level object or array is depth 1),
        /// so hostile input cannot exhaust the stack.
        public var maxDepth: Int
        /// The most bytes read, or nil for no limit: "larger than N bytes".
        public var maxBytes: Int?
        /// A member named twice.
        public var repeatedNames: RepeatedNames
        /// Whether a comma may come before `}` or `]` (Foundation's reader takes one).
        public var trailingCommas: Bool
        /// Whether the top-level value may be a string, number, literal (else only an object or
        /// an array: Foundation's reader without `.fragmentsAllowed`).
        public var topLevelScalars: Bool
        /// Whether a UTF-8 byte order mark before the value is skipped.
        public var byteOrderMark: Bool

        /// Options with every field given.
        public init(
            maxDepth: Int, maxBytes: Int? = nil, repeatedNames: RepeatedNames = .lastWins, trailingCommas: Bool = false,
            topLevelScalars: Bool = true, byteOrderMark: Bool = false
        ) {
            self.maxDepth = maxDepth
            self.maxBytes = maxBytes
            self.repeatedNames = repeatedNames
            self.trailingCommas = trailingCommas
            self.topLevelScalars = topLevelScalars
            self.byteOrderMark = byteOrderMark
        }

        /// RFC 8259 exactly, nested at most 64 deep, a repeated name's last value kept: the
        /// documents Gatehouse stores (settings, custom claims).
        public static let strict = Options(maxDepth: 64)

        /// What Foundation's `JSONSerialization` and `JSONDecoder` accept: nested at most 512
        /// deep, a comma before `}` or `]`, a byte order mark, an object or array at the top.
        public static let foundation = Options(maxDepth: 512, trailingCommas: true, topLevelScalars: false, byteOrderMark: true)
    }

    /// One member of a top-level object, with where its value's text is.
    public struct Member: Sendable, Hashable {
        /// The member's name, escapes decoded.
        public var name: String
        /// Its value.
        public var value: JSONTree
        /// The byte offsets of the value's text in what was read.
        public var range: Range<Int>
    }

    /// The members of the object `bytes` holds, in order, each name once (per
    /// `options.repeatedNames`), with the byte range of each value; nil when `bytes` is JSON
    /// whose top-level value is not an object; throws when it is not JSON. With `values` false,
    /// every value is read and checked but not built (`.null` stands for it): for callers that
    /// only need a member's text.
    @inlinable
    public static func objectMembers(
        in bytes: some Collection<UInt8>, options: Options = .strict, values: Bool = true
    ) throws(JSONTree.SyntaxError) -> [Member]? {
        let result =
            bytes.withContiguousStorageIfAvailable { buffer in
                Result { () throws(JSONTree.SyntaxError) in try objectMembers(buffer: buffer, options: options, values: values) }
            } ?? Array(bytes).withUnsafeBufferPointer { buffer in
                Result { () throws(JSONTree.SyntaxError) in try objectMembers(buffer: buffer, options: options, values: values) }
            }
        return try result.get()
    }

    /// `objectMembers(in:options:values:)` over a buffer.
    public static func objectMembers(
        buffer: UnsafeBufferPointer<UInt8>, options: Options = .strict, values: Bool = true
    ) throws(JSONTree.SyntaxError) -> [Member]? {
        var scanner = try Scanner(buffer, options: options)
        scanner.keepsValues = values
        guard scanner.peek == UInt8(ascii: "{") else {
            _ = try scanner.value(depth: 0)
            try scanner.end()
            return nil
        }
        var ranges: [Range<Int>]? = []
        guard case .object(let members) = try scanner.object(depth: 1, ranges: &ranges), let ranges else { return nil }
        try scanner.end()
        return zip(members, ranges).map { Member(name: $0.name, value: $0.value, range: $1) }
    }

    /// The members of a flat object of strings and nulls of at most `maxMembers` members, each
    /// name once (`{"email":"…","password":"…"}`), or nil when `bytes` is anything else: not
    /// JSON, another shape, a repeated name, more members.
    @inlinable
    public static func flatStrings(_ bytes: some Collection<UInt8>, maxMembers: Int = 16) -> [String: String?]? {
        if let result = bytes.withContiguousStorageIfAvailable({ flatStrings(buffer: $0, maxMembers: maxMembers) }) { return result }
        return Array(bytes).withUnsafeBufferPointer { flatStrings(buffer: $0, maxMembers: maxMembers) }
    }

    /// `flatStrings(_:maxMembers:)` over a buffer.
    public static func flatStrings(buffer: UnsafeBufferPointer<UInt8>, maxMembers: Int = 16) -> [String: String?]? {
        var scanner = Scanner(unchecked: buffer, options: .strict)
        return try? scanner.flatStrings(maxMembers: maxMembers)
    }

    /// The value `buffer` holds, per `options`.
    static func tree(buffer: UnsafeBufferPointer<UInt8>, options: Options) throws(JSONTree.SyntaxError) -> JSONTree {
        var scanner = try Scanner(buffer, options: options)
        let value = try scanner.value(depth: 0)
        try scanner.end()
        return value
    }
}
