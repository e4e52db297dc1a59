import Foundation

/// A JSON value of an import line, read by `ImportJSON`: the few shapes an import record's
/// fields take, without Foundation's `Any` boxes.
enum ImportJSONValue {
    case null
    case bool(Bool)
    /// A number (its text is not kept: no field of a record is a number).
    case number
    case string(String)
    /// An array; `strings` holds its members when every one is a string.
    case array(strings: [String]?)
    /// An object; `range` is where its text is in the line (its members are read again by
    /// Foundation only where a field needs them: `customClaims`).
    case object(range: Range<Int>)
}

/// A strict RFC 8259 reader of one import line's top-level object (the hot path of
/// `gatehouse users import`: Foundation's `JSONSerialization` boxed every value and cost most of
/// the CLI's time). It accepts what `JSONSerialization` accepts (UTF-8 only, nesting at most 512
/// deep, a comma before `}` or `]`) and refuses the rest; a member named twice keeps its last
/// value, as Foundation does (a test compares the two on a corpus of lines).
struct ImportJSON {
    /// Why a line is not read: not JSON at all, or JSON whose top level is not an object.
    enum Failure: Error, Equatable { case notJSON, notAnObject }

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    private var depth = 0
    static let maxDepth = 512

    private init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    /// The members of the object `line` holds (a UTF-8 byte order mark before it is skipped).
    static func object(_ line: [UInt8]) throws(Failure) -> [String: ImportJSONValue] {
        do {
            return try line.withUnsafeBufferPointer { buffer in
                var reader = ImportJSON(buffer)
                if buffer.count >= 3, buffer[0] == 0xEF, buffer[1] == 0xBB, buffer[2] == 0xBF { reader.index = 3 }
                reader.skipSpace()
                guard reader.peek == UInt8(ascii: "{") else {
                    // A lone scalar is not JSON to Foundation without `.fragmentsAllowed`.
                    if reader.peek == UInt8(ascii: "[") {
                        _ = try reader.value()
                        reader.skipSpace()
                        throw reader.index == buffer.count ? Failure.notAnObject : Failure.notJSON
                    }
                    throw Failure.notJSON
                }
                let members = try reader.members()
                reader.skipSpace()
                guard reader.index == buffer.count else { throw Failure.notJSON }
                return members
            }
        } catch let failure as Failure {
            throw failure
        } catch {
            throw .notJSON
        }
    }

    private var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipSpace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func expect(_ byte: UInt8) throws(Failure) {
        guard peek == byte else { throw .notJSON }
        index += 1
    }

    /// An object's members, `{` at `index`.
    private mutating func members() throws(Failure) -> [String: ImportJSONValue] {
        depth += 1
        guard depth <= Self.maxDepth else { throw .notJSON }
        defer { depth -= 1 }
        try expect(UInt8(ascii: "{"))
        var result: [String: ImportJSONValue] = [:]
        skipSpace()
        if peek == UInt8(ascii: "}") {
            index += 1
            return result
        }
        while true {
            skipSpace()
            let key = try string()
            skipSpace()
            try expect(UInt8(ascii: ":"))
            skipSpace()
            result[key] = try value()
            skipSpace()
            guard let next = peek else { throw .notJSON }
            index += 1
            if next == UInt8(ascii: "}") { return result }
            guard next == UInt8(ascii: ",") else { throw .notJSON }
            // Foundation's reader takes a comma before the end.
            skipSpace()
            if peek == UInt8(ascii: "}") {
                index += 1
                return result
            }
        }
    }

    private mutating func value() throws(Failure) -> ImportJSONValue {
        guard let first = peek else { throw .notJSON }
        switch first {
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "{"):
            let start = index
            _ = try members()
            return .object(range: start..<index)
        case UInt8(ascii: "["): return .array(strings: try array())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        default:
            try number()
            return .number
        }
    }

    private mutating func literal(_ word: StaticString) throws(Failure) {
        let count = word.utf8CodeUnitCount
        guard bytes.count - index >= count else { throw .notJSON }
        for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { throw .notJSON }
        index += count
    }

    /// An array, `[` at `index`: its members when all are strings, else nil.
    private mutating func array() throws(Failure) -> [String]? {
        depth += 1
        guard depth <= Self.maxDepth else { throw .notJSON }
        defer { depth -= 1 }
        try expect(UInt8(ascii: "["))
        var strings: [String]? = []
        skipSpace()
        if peek == UInt8(ascii: "]") {
            index += 1
            return strings
        }
        while true {
            skipSpace()
            if case .string(let text) = try value() { strings?.append(text) } else { strings = nil }
            skipSpace()
            guard let next = peek else { throw .notJSON }
            index += 1
            if next == UInt8(ascii: "]") { return strings }
            guard next == UInt8(ascii: ",") else { throw .notJSON }
            skipSpace()
            if peek == UInt8(ascii: "]") {
                index += 1
                return strings
            }
        }
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    private mutating func number() throws(Failure) {
        func isDigit(_ byte: UInt8?) -> Bool { byte.map { $0 >= 0x30 && $0 <= 0x39 } ?? false }
        if peek == UInt8(ascii: "-") { index += 1 }
        guard isDigit(peek) else { throw .notJSON }
        if peek == UInt8(ascii: "0") {
            index += 1
        } else {
            while isDigit(peek) { index += 1 }
        }
        if peek == UInt8(ascii: ".") {
            index += 1
            guard isDigit(peek) else { throw .notJSON }
            while isDigit(peek) { index += 1 }
        }
        if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
            index += 1
            if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { index += 1 }
            guard isDigit(peek) else { throw .notJSON }
            while isDigit(peek) { index += 1 }
        }
    }

    /// A string, `"` at `index`: valid UTF-8, no raw control character, escapes decoded.
    private mutating func string() throws(Failure) -> String {
        try expect(UInt8(ascii: "\""))
        let start = index
        // The common case: no escape, straight from the bytes.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                guard let text = String(validating: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self) else { throw .notJSON }
                index += 1
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            guard byte >= 0x20 else { throw .notJSON }
            index += 1
        }
        var decoded = Array(bytes[start..<index])
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard let text = String(validating: decoded, as: UTF8.self) else { throw .notJSON }
                return text
            case UInt8(ascii: "\\"):
                guard let escape = peek else { throw .notJSON }
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(escape)
                case UInt8(ascii: "b"): decoded.append(0x08)
                case UInt8(ascii: "f"): decoded.append(0x0C)
                case UInt8(ascii: "n"): decoded.append(0x0A)
                case UInt8(ascii: "r"): decoded.append(0x0D)
                case UInt8(ascii: "t"): decoded.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800..<0xDC00).contains(scalar) {
                        // A high surrogate must be followed by an escaped low one.
                        guard peek == UInt8(ascii: "\\") else { throw .notJSON }
                        index += 1
                        try expect(UInt8(ascii: "u"))
                        let low = try hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw .notJSON }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00..<0xE000).contains(scalar) {
                        throw .notJSON
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw .notJSON }
                    decoded.append(contentsOf: UTF8.encode(unicode)!)
                default: throw .notJSON
                }
            default:
                guard byte >= 0x20 else { throw .notJSON }
                decoded.append(byte)
            }
        }
        throw .notJSON
    }

    private mutating func hex4() throws(Failure) -> UInt32 {
        guard bytes.count - index >= 4 else { throw .notJSON }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            index += 1
            let digit: UInt8
            switch byte {
            case 0x30...0x39: digit = byte - 0x30
            case 0x41...0x46: digit = byte - 0x41 + 10
            case 0x61...0x66: digit = byte - 0x61 + 10
            default: throw .notJSON
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }
}
