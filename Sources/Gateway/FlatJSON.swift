import GatehouseSupport
/// A fast path for the request bodies most requests carry: a JSON object whose members are all
/// strings (or `null`), such as `{"refreshToken":"…"}` or `{"email":"…","password":"…"}`.
///
/// `JSONDecoder` spent 15–25 µs on each such body. `parse` reads exactly this shape and returns
/// nil for anything else — a nested value, a number, a duplicate key, a lone surrogate, invalid
/// UTF-8, trailing bytes — and the caller then decodes with `JSONDecoder` as before, so every
/// error a client sees (and every unusual body that is accepted) is exactly what it was.
enum FlatJSON {
    /// The members of a flat object of strings and nulls, or nil when `bytes` is anything else.
    static func parse(_ bytes: some Collection<UInt8>) -> [String: String?]? {
        if let result = bytes.withContiguousStorageIfAvailable({ parse(buffer: $0) }) { return result }
        return Array(bytes).withUnsafeBufferPointer { parse(buffer: $0) }
    }

    static func parse(buffer: UnsafeBufferPointer<UInt8>) -> [String: String?]? {
        var reader = Reader(bytes: buffer)
        reader.skipWhitespace()
        guard reader.take(UInt8(ascii: "{")) else { return nil }
        var members: [String: String?] = [:]
        reader.skipWhitespace()
        if !reader.take(UInt8(ascii: "}")) {
            while true {
                reader.skipWhitespace()
                guard let key = reader.string() else { return nil }
                reader.skipWhitespace()
                guard reader.take(UInt8(ascii: ":")) else { return nil }
                reader.skipWhitespace()
                let value: String?
                if reader.takeLiteral("null") {
                    value = nil
                } else {
                    guard let text = reader.string() else { return nil }
                    value = text
                }
                guard members.updateValue(value, forKey: key) == nil, members.count <= 16 else { return nil }
                reader.skipWhitespace()
                if reader.take(UInt8(ascii: ",")) { continue }
                guard reader.take(UInt8(ascii: "}")) else { return nil }
                break
            }
        }
        reader.skipWhitespace()
        return reader.atEnd ? members : nil
    }

    struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        var atEnd: Bool { index == bytes.count }

        mutating func skipWhitespace() {
            while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 {
                index += 1
            }
        }

        mutating func take(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        mutating func takeLiteral(_ literal: StaticString) -> Bool {
            let count = literal.utf8CodeUnitCount
            guard bytes.count - index >= count else { return false }
            for i in 0..<count where bytes[index + i] != literal.utf8Start[i] { return false }
            index += count
            return true
        }

        /// A JSON string at the current position, unescaped; nil if it is not a valid one.
        mutating func string() -> String? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            let start = index
            // Common case: no escapes. Control characters are invalid inside JSON strings.
            while index < bytes.count {
                let b = bytes[index]
                if b == UInt8(ascii: "\"") {
                    let text = String(validating: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                    index += 1
                    return text
                }
                if b == UInt8(ascii: "\\") { break }
                if b < 0x20 { return nil }
                index += 1
            }
            guard index < bytes.count else { return nil }
            // With escapes: copy out, then validate the UTF-8 as a whole.
            var out = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
            while index < bytes.count {
                let b = bytes[index]
                index += 1
                switch b {
                case UInt8(ascii: "\""):
                    return String(validating: out, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard index < bytes.count else { return nil }
                    let e = bytes[index]
                    index += 1
                    if let byte = JSONEscape.byte(after: e) {
                        out.append(byte)
                        continue
                    }
                    switch e {
                    case UInt8(ascii: "u"):
                        guard let first = hex4() else { return nil }
                        var scalarValue = first
                        if (0xD800...0xDBFF).contains(first) {
                            // A high surrogate must be followed by an escaped low one.
                            guard takeLiteral("\\u"), let second = hex4(), (0xDC00...0xDFFF).contains(second) else { return nil }
                            scalarValue = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
                        } else if (0xDC00...0xDFFF).contains(first) {
                            return nil
                        }
                        guard let scalar = Unicode.Scalar(scalarValue) else { return nil }
                        out.append(contentsOf: String(Character(scalar)).utf8)
                    default:
                        return nil
                    }
                default:
                    if b < 0x20 { return nil }
                    out.append(b)
                }
            }
            return nil
        }

        mutating func hex4() -> UInt32? {
            guard bytes.count - index >= 4 else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let b = bytes[index]
                index += 1
                let digit: UInt8
                switch b {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = b - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = b - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = b - UInt8(ascii: "A") + 10
                default: return nil
                }
                value = value << 4 | UInt32(digit)
            }
            return value
        }
    }
}

/// A request body that can be built from a flat object of strings (see `FlatJSON`). `init(flat:)`
/// returns nil when the members do not fit (a required one missing or null): the body is then
/// decoded by `JSONDecoder`, which reports the problem.
protocol FlatJSONDecodable: Decodable {
    init?(flat members: [String: String?])
}
