/// A JSON value (RFC 8259) as `JSONReader` reads it: numbers kept as written, object members in
/// their order. Used where JSON is changed and written back (merge patches of settings, custom
/// claims), so members nobody touched come back as they were (no `1.0` → `1`, no `false` → `0`).
public indirect enum JSONTree: Sendable, Hashable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number, as its text (already checked against the JSON grammar).
    case number(String)
    /// A string, escapes decoded.
    case string(String)
    /// An array.
    case array([JSONTree])
    /// An object: members in order, each name once (a repeated name keeps its last value, at
    /// the place of its first).
    case object([JSONMember])

    /// The members of an object, nil for any other value.
    public var members: [JSONMember]? {
        if case .object(let members) = self { return members }
        return nil
    }

    /// Why text is not JSON, with the byte offset where reading stopped.
    public struct SyntaxError: Error, Hashable, CustomStringConvertible {
        /// What went wrong; plain values only, so throwing one costs the reader nothing on the
        /// paths where nothing is thrown (the reason's text is made only when asked for).
        enum Problem: Hashable {
            case expectedValue, expectedMemberName, expectedColon, expectedCommaOrBrace, expectedCommaOrBracket
            case expectedObjectOrArray, textAfterValue, repeatedName
            /// `true`, `false` or `null`, by its first byte.
            case expectedLiteral(UInt8)
            case expectedDigit, expectedFractionDigit, expectedExponentDigit
            case unterminatedString, unterminatedEscape, unknownEscape, expectedFourHexDigits, expectedHexDigit
            case loneSurrogate, controlCharacter, invalidUTF8
            case nestedDeeper(Int), larger(Int)
        }

        let problem: Problem
        /// The byte offset in the text.
        public let offset: Int

        /// What was expected, e.g. "expected ',' or '}'".
        public var reason: String {
            switch problem {
            case .expectedValue: "expected a value"
            case .expectedMemberName: "expected a member name"
            case .expectedColon: "expected ':'"
            case .expectedCommaOrBrace: "expected ',' or '}'"
            case .expectedCommaOrBracket: "expected ',' or ']'"
            case .expectedObjectOrArray: "expected an object or an array"
            case .textAfterValue: "unexpected text after the value"
            case .repeatedName: "repeated member name"
            case .expectedLiteral(let first): first == UInt8(ascii: "t") ? "expected true" : first == UInt8(ascii: "f") ? "expected false" : "expected null"
            case .expectedDigit: "expected a digit"
            case .expectedFractionDigit: "expected a digit after '.'"
            case .expectedExponentDigit: "expected a digit in the exponent"
            case .unterminatedString: "unterminated string"
            case .unterminatedEscape: "unterminated escape"
            case .unknownEscape: "unknown escape"
            case .expectedFourHexDigits: "expected four hex digits"
            case .expectedHexDigit: "expected a hex digit"
            case .loneSurrogate: "lone surrogate in a \\u escape"
            case .controlCharacter: "control character in a string"
            case .invalidUTF8: "invalid UTF-8 in a string"
            case .nestedDeeper(let limit): "nested deeper than \(limit)"
            case .larger(let limit): "larger than \(limit) bytes"
            }
        }

        /// "reason at byte N".
        public var description: String { "\(reason) at byte \(offset)" }
    }

    /// The deepest nesting `init(parsing:)` reads by default (`JSONReader.Options.strict`).
    public static let maxDepth = JSONReader.Options.strict.maxDepth

    /// Parses `text`: exactly one JSON value, whitespace around it allowed (`JSONReader`).
    public init(parsing text: String, options: JSONReader.Options = .strict) throws(SyntaxError) {
        var text = text
        let result = text.withUTF8 { buffer in
            Result { () throws(SyntaxError) in try JSONReader.tree(buffer: buffer, options: options) }
        }
        self = try result.get()
    }

    /// Parses the UTF-8 `bytes`: exactly one JSON value, whitespace around it allowed.
    public init(parsing bytes: some Collection<UInt8>, options: JSONReader.Options = .strict) throws(SyntaxError) {
        let result =
            bytes.withContiguousStorageIfAvailable { buffer in
                Result { () throws(SyntaxError) in try JSONReader.tree(buffer: buffer, options: options) }
            } ?? Array(bytes).withUnsafeBufferPointer { buffer in
                Result { () throws(SyntaxError) in try JSONReader.tree(buffer: buffer, options: options) }
            }
        self = try result.get()
    }

    /// The compact JSON text of the value (no whitespace; strings escaped as RFC 8259 requires,
    /// with the two-character escapes where it has one, `\u00XX` for other control characters),
    /// so never longer than text the reader read it from.
    public var text: String {
        var out: [UInt8] = []
        write(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    func write(to out: inout [UInt8]) {
        switch self {
        case .null: out += Array("null".utf8)
        case .bool(let value): out += Array((value ? "true" : "false").utf8)
        case .number(let text): out += Array(text.utf8)
        case .string(let value): Self.writeString(value, to: &out)
        case .array(let values):
            out.append(UInt8(ascii: "["))
            for (i, value) in values.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                value.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, member) in members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                Self.writeString(member.name, to: &out)
                out.append(UInt8(ascii: ":"))
                member.value.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    static func writeString(_ value: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        let hex = Array("0123456789abcdef".utf8)
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case 0x0A: out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case 0x0D: out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case 0x09: out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case 0x08: out += [UInt8(ascii: "\\"), UInt8(ascii: "b")]
            case 0x0C: out += [UInt8(ascii: "\\"), UInt8(ascii: "f")]
            case 0..<0x20: out += Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

/// One member of a JSON object.
public struct JSONMember: Sendable, Hashable {
    /// The member's name.
    public var name: String
    /// The member's value.
    public var value: JSONTree
    /// The member `name`: `value`.
    public init(name: String, value: JSONTree) {
        self.name = name
        self.value = value
    }
}
