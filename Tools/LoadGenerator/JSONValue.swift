import GatehouseSupport
/// A parsed JSON document, for checking response bodies.
///
/// `JSONDecoder` cost about 12 µs of the load generator's ~57 µs per checked refresh, CPU taken
/// from the server it measures on a shared machine; this strict RFC 8259 reader does the same
/// checks' parsing in a fraction of that. It rejects what a strict parser rejects (trailing
/// commas, unquoted keys, bad escapes, lone surrogates, invalid UTF-8, leading zeros, trailing
/// garbage) and nests at most `maxDepth` deep.
enum JSONValue: Equatable, Sendable {
    case object([String: JSONValue])
    case array([JSONValue])
    case string(String)
    case number(Double)
    case bool(Bool)
    case null

    static let maxDepth = 64

    struct ParseError: Error, Equatable {
        var offset: Int
        var reason: String
    }

    subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    var string: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    var number: Double? {
        if case .number(let value) = self { return value }
        return nil
    }

    static func parse(_ bytes: [UInt8]) throws(ParseError) -> JSONValue {
        try bytes.withUnsafeBufferPointer { (buffer) throws(ParseError) -> JSONValue in
            var reader = Reader(bytes: buffer)
            reader.skipWhitespace()
            let value = try reader.value(depth: 0)
            reader.skipWhitespace()
            guard reader.index == buffer.count else { throw ParseError(offset: reader.index, reason: "trailing characters") }
            return value
        }
    }

    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        func fail(_ reason: String) -> ParseError { ParseError(offset: index, reason: reason) }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func value(depth: Int) throws(ParseError) -> JSONValue {
            guard index < bytes.count else { throw fail("unexpected end") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try object(depth: depth + 1)
            case UInt8(ascii: "["): return try array(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            default: return .number(try number())
            }
        }

        mutating func literal(_ word: StaticString) throws(ParseError) {
            let count = word.utf8CodeUnitCount
            guard index + count <= bytes.count else { throw fail("unexpected end") }
            for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { throw fail("bad literal") }
            index += count
        }

        mutating func object(depth: Int) throws(ParseError) -> JSONValue {
            guard depth <= JSONValue.maxDepth else { throw fail("nested too deeply") }
            index += 1
            var members: [String: JSONValue] = [:]
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            while true {
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a key") }
                let key = try string()
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                index += 1
                skipWhitespace()
                members[key] = try value(depth: depth)
                if try !more(closing: UInt8(ascii: "}")) { return .object(members) }
            }
        }

        mutating func array(depth: Int) throws(ParseError) -> JSONValue {
            guard depth <= JSONValue.maxDepth else { throw fail("nested too deeply") }
            index += 1
            var elements: [JSONValue] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(elements)
            }
            while true {
                skipWhitespace()
                elements.append(try value(depth: depth))
                if try !more(closing: UInt8(ascii: "]")) { return .array(elements) }
            }
        }

        /// After a member or element: true on a `,` (another follows), false on `closing` (the
        /// object or array ends); both consumed.
        mutating func more(closing: UInt8) throws(ParseError) -> Bool {
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end") }
            let byte = bytes[index]
            guard byte == UInt8(ascii: ",") || byte == closing else {
                throw fail("expected ',' or '\(Character(Unicode.Scalar(closing)))'")
            }
            index += 1
            return byte == UInt8(ascii: ",")
        }

        /// A string at `index` (on its opening quote).
        mutating func string() throws(ParseError) -> String {
            index += 1
            let start = index
            // Fast path: no escapes. UTF-8 is validated when the String is made.
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    let raw = UnsafeBufferPointer(rebasing: bytes[start..<index])
                    index += 1
                    guard let text = String(validating: raw, as: UTF8.self) else { throw fail("invalid UTF-8") }
                    return text
                }
                if byte == UInt8(ascii: "\\") { break }
                if byte < 0x20 { throw fail("control character in a string") }
                index += 1
            }
            var out = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
            while index < bytes.count {
                let byte = bytes[index]
                switch byte {
                case UInt8(ascii: "\""):
                    index += 1
                    guard let text = String(validating: out, as: UTF8.self) else { throw fail("invalid UTF-8") }
                    return text
                case UInt8(ascii: "\\"):
                    index += 1
                    guard index < bytes.count else { throw fail("unexpected end") }
                    let escape = bytes[index]
                    index += 1
                    if let byte = JSONEscape.byte(after: escape) {
                        out.append(byte)
                        continue
                    }
                    switch escape {
                    case UInt8(ascii: "u"):
                        var scalar = try hex4()
                        if (0xD800..<0xDC00).contains(scalar) {
                            guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                                throw fail("lone surrogate")
                            }
                            index += 2
                            let low = try hex4()
                            guard (0xDC00..<0xE000).contains(low) else { throw fail("lone surrogate") }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        } else if (0xDC00..<0xE000).contains(scalar) {
                            throw fail("lone surrogate")
                        }
                        out.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
                    default:
                        throw fail("bad escape")
                    }
                default:
                    if byte < 0x20 { throw fail("control character in a string") }
                    out.append(byte)
                    index += 1
                }
            }
            throw fail("unterminated string")
        }

        mutating func hex4() throws(ParseError) -> UInt32 {
            guard index + 4 <= bytes.count else { throw fail("unexpected end") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt32
                switch byte {
                case 0x30...0x39: digit = UInt32(byte - 0x30)
                case 0x41...0x46: digit = UInt32(byte - 0x41 + 10)
                case 0x61...0x66: digit = UInt32(byte - 0x61 + 10)
                default: throw fail("bad \\u escape")
                }
                value = value << 4 | digit
                index += 1
            }
            return value
        }

        /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
        mutating func number() throws(ParseError) -> Double {
            let start = index
            if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail("unexpected character") }
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
                if index < bytes.count, isDigit(bytes[index]) { throw fail("leading zero") }
            } else {
                while index < bytes.count, isDigit(bytes[index]) { index += 1 }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                guard index < bytes.count, isDigit(bytes[index]) else { throw fail("bad fraction") }
                while index < bytes.count, isDigit(bytes[index]) { index += 1 }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
                guard index < bytes.count, isDigit(bytes[index]) else { throw fail("bad exponent") }
                while index < bytes.count, isDigit(bytes[index]) { index += 1 }
            }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            guard let value = Double(text) else { throw fail("bad number") }
            return value
        }

        func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }
    }
}
