import Foundation

/// A JSON value (RFC 8259) as read: numbers kept as written, object members in their order.
/// Used where JSON is changed and written back (merge patches of settings, custom claims), so
/// members nobody touched come back as they were (no `1.0` → `1`, no `false` → `0`).
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
        /// What was expected.
        public let reason: String
        /// The byte offset in the text.
        public let offset: Int
        /// "reason at byte N".
        public var description: String { "\(reason) at byte \(offset)" }
    }

    /// The deepest nesting read (arrays and objects), so hostile input cannot exhaust the stack.
    public static let maxDepth = 64

    /// Parses `text`: exactly one JSON value, whitespace around it allowed.
    public init(parsing text: String) throws(SyntaxError) {
        var reader = Reader(bytes: Array(text.utf8))
        reader.skipWhitespace()
        let value = try reader.value(depth: 0)
        reader.skipWhitespace()
        guard reader.index == reader.bytes.count else { throw reader.error("unexpected text after the value") }
        self = value
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

    /// A recursive-descent reader over UTF-8 bytes.
    struct Reader {
        let bytes: [UInt8]
        var index = 0

        func error(_ reason: String) -> SyntaxError { SyntaxError(reason: reason, offset: index) }

        var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipWhitespace() {
            while let b = peek, b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D { index += 1 }
        }

        mutating func literal(_ word: String, _ value: JSONTree) throws(SyntaxError) -> JSONTree {
            let expected = Array(word.utf8)
            guard index + expected.count <= bytes.count, Array(bytes[index..<(index + expected.count)]) == expected else {
                throw error("expected \(word)")
            }
            index += expected.count
            return value
        }

        mutating func value(depth: Int) throws(SyntaxError) -> JSONTree {
            guard let b = peek else { throw error("expected a value") }
            switch b {
            case UInt8(ascii: "{"): return try object(depth: depth + 1)
            case UInt8(ascii: "["): return try array(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): return try literal("true", .bool(true))
            case UInt8(ascii: "f"): return try literal("false", .bool(false))
            case UInt8(ascii: "n"): return try literal("null", .null)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
            default: throw error("expected a value")
            }
        }

        mutating func object(depth: Int) throws(SyntaxError) -> JSONTree {
            guard depth <= JSONTree.maxDepth else { throw error("nested deeper than \(JSONTree.maxDepth)") }
            index += 1
            var members: [JSONMember] = []
            var positions: [String: Int] = [:]
            skipWhitespace()
            if peek == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            while true {
                skipWhitespace()
                guard peek == UInt8(ascii: "\"") else { throw error("expected a member name") }
                let name = try string()
                skipWhitespace()
                guard peek == UInt8(ascii: ":") else { throw error("expected ':'") }
                index += 1
                skipWhitespace()
                let value = try value(depth: depth)
                if let at = positions[name] {
                    members[at].value = value
                } else {
                    positions[name] = members.count
                    members.append(JSONMember(name: name, value: value))
                }
                skipWhitespace()
                switch peek {
                case UInt8(ascii: ","): index += 1
                case UInt8(ascii: "}"):
                    index += 1
                    return .object(members)
                default: throw error("expected ',' or '}'")
                }
            }
        }

        mutating func array(depth: Int) throws(SyntaxError) -> JSONTree {
            guard depth <= JSONTree.maxDepth else { throw error("nested deeper than \(JSONTree.maxDepth)") }
            index += 1
            var values: [JSONTree] = []
            skipWhitespace()
            if peek == UInt8(ascii: "]") {
                index += 1
                return .array(values)
            }
            while true {
                skipWhitespace()
                values.append(try value(depth: depth))
                skipWhitespace()
                switch peek {
                case UInt8(ascii: ","): index += 1
                case UInt8(ascii: "]"):
                    index += 1
                    return .array(values)
                default: throw error("expected ',' or ']'")
                }
            }
        }

        mutating func number() throws(SyntaxError) -> String {
            let start = index
            if peek == UInt8(ascii: "-") { index += 1 }
            func digits(_ reader: inout Reader) -> Int {
                var n = 0
                while let b = reader.peek, b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9") {
                    reader.index += 1
                    n += 1
                }
                return n
            }
            if peek == UInt8(ascii: "0") {
                index += 1
            } else if digits(&self) == 0 {
                throw error("expected a digit")
            }
            if peek == UInt8(ascii: ".") {
                index += 1
                guard digits(&self) > 0 else { throw error("expected a digit after '.'") }
            }
            if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
                index += 1
                if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { index += 1 }
                guard digits(&self) > 0 else { throw error("expected a digit in the exponent") }
            }
            return String(decoding: bytes[start..<index], as: UTF8.self)
        }

        mutating func hex4() throws(SyntaxError) -> UInt32 {
            guard index + 4 <= bytes.count else { throw error("expected four hex digits") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let b = bytes[index]
                let digit: UInt8
                switch b {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = b - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = b - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = b - UInt8(ascii: "A") + 10
                default: throw error("expected a hex digit")
                }
                value = value << 4 | UInt32(digit)
                index += 1
            }
            return value
        }

        mutating func string() throws(SyntaxError) -> String {
            index += 1  // the opening quote
            var out: [UInt8] = []
            while true {
                guard let b = peek else { throw error("unterminated string") }
                switch b {
                case UInt8(ascii: "\""):
                    index += 1
                    // Invalid UTF-8 in the input was already repaired by String(text.utf8).
                    return String(decoding: out, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    index += 1
                    guard let escape = peek else { throw error("unterminated escape") }
                    index += 1
                    if escape == UInt8(ascii: "u") {
                        var scalar = try hex4()
                        if (0xD800..<0xDC00).contains(scalar) {
                            guard peek == UInt8(ascii: "\\"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "u") else {
                                throw error("lone surrogate in a \\u escape")
                            }
                            index += 2
                            let low = try hex4()
                            guard (0xDC00..<0xE000).contains(low) else { throw error("lone surrogate in a \\u escape") }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let unicode = Unicode.Scalar(scalar) else { throw error("lone surrogate in a \\u escape") }
                        out += Array(String(Character(unicode)).utf8)
                    } else {
                        switch escape {
                        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                        case UInt8(ascii: "b"): out.append(0x08)
                        case UInt8(ascii: "f"): out.append(0x0C)
                        case UInt8(ascii: "n"): out.append(0x0A)
                        case UInt8(ascii: "r"): out.append(0x0D)
                        case UInt8(ascii: "t"): out.append(0x09)
                        default: throw error("unknown escape")
                        }
                    }
                case 0..<0x20:
                    throw error("control character in a string")
                default:
                    out.append(b)
                    index += 1
                }
            }
        }
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
