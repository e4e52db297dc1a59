/// Writes one JSON object field by field, so raw JSON (a user's settings) can be embedded byte
/// for byte and fields keep a stable order. Used where `JSONEncoder` is too slow for a hot path
/// (HTTP bodies, access-token payloads).
public struct JSONObjectWriter {
    private var bytes: [UInt8] = [UInt8(ascii: "{")]
    private var first = true

    /// A writer holding an empty object.
    public init() {}

    private mutating func key(_ name: String) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
        Self.appendString(name, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }

    /// Adds `"name": "value"` (escaped), or `null` when `value` is nil.
    public mutating func string(_ name: String, _ value: String?) {
        key(name)
        if let value { Self.appendString(value, to: &bytes) } else { Self.appendLiteral("null", to: &bytes) }
    }
    /// Adds `"name": value` as a decimal integer.
    public mutating func int(_ name: String, _ value: Int) {
        key(name)
        Self.appendInt(value, to: &bytes)
    }
    /// Adds `"name": true` or `false`.
    public mutating func bool(_ name: String, _ value: Bool) {
        key(name)
        Self.appendLiteral(value ? "true" : "false", to: &bytes)
    }
    /// Adds `"name": [...]`, an array of strings.
    public mutating func strings(_ name: String, _ values: [String]) {
        key(name)
        bytes.append(UInt8(ascii: "["))
        for (i, v) in values.enumerated() {
            if i > 0 { bytes.append(UInt8(ascii: ",")) }
            Self.appendString(v, to: &bytes)
        }
        bytes.append(UInt8(ascii: "]"))
    }
    /// Embeds already-serialized JSON.
    public mutating func raw(_ name: String, _ json: some Sequence<UInt8>) {
        key(name)
        bytes.append(contentsOf: json)
    }

    /// Closes the object and returns its UTF-8 bytes; the writer is used up.
    public consuming func finish() -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    static func appendLiteral(_ literal: StaticString, to out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// Appends the decimal digits of `value`.
    static func appendInt(_ value: Int, to out: inout [UInt8]) {
        if value == 0 {
            out.append(UInt8(ascii: "0"))
            return
        }
        var magnitude = value.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: enough for 20 digits
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            while magnitude > 0 {
                buffer[23 - count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            }
            if value < 0 { out.append(UInt8(ascii: "-")) }
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[(24 - count)...]))
        }
    }

    /// Appends a JSON string literal (RFC 8259 escaping). A string that needs no escaping (the
    /// usual case: ids, emails, tokens) is copied in one piece.
    public static func appendString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { utf8 in
            var start = 0
            for (i, b) in utf8.enumerated() where b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<i]))
                start = i + 1
                switch b {
                case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
                case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
                case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
                case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
                case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
                default:
                    let hex: StaticString = "0123456789abcdef"
                    out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex.utf8Start[Int(b >> 4)], hex.utf8Start[Int(b & 0xF)]])
                }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...]))
        }
        out.append(UInt8(ascii: "\""))
    }
}
