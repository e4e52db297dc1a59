/// Writes one JSON object field by field, so raw JSON (a user's settings) can be embedded byte
/// for byte and fields keep a stable order. Used where `JSONEncoder` is too slow for a hot path
/// (HTTP bodies, access-token payloads).
public struct JSONObjectWriter {
    private var bytes: [UInt8] = [UInt8(ascii: "{")]
    private var first = true

    public init() {}

    private mutating func key(_ name: String) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
        Self.appendString(name, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }

    public mutating func string(_ name: String, _ value: String?) {
        key(name)
        if let value { Self.appendString(value, to: &bytes) } else { bytes.append(contentsOf: Array("null".utf8)) }
    }
    public mutating func int(_ name: String, _ value: Int) {
        key(name)
        bytes.append(contentsOf: Array(String(value).utf8))
    }
    public mutating func bool(_ name: String, _ value: Bool) {
        key(name)
        bytes.append(contentsOf: Array((value ? "true" : "false").utf8))
    }
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

    public func finish() -> [UInt8] { bytes + [UInt8(ascii: "}")] }

    /// Appends a JSON string literal (RFC 8259 escaping).
    public static func appendString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(b >> 4)], hex[Int(b & 0xF)]])
            default: out.append(b)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

