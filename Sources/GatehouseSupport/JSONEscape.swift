/// What a JSON string escape stands for (RFC 8259 §7), for the server's `JSONReader` and the load
/// generator's reader.
public enum JSONEscape {
    /// The byte a one-character escape (`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`) stands
    /// for, given the character after the backslash; nil for `u` (four hex digits follow) and for
    /// anything that is not an escape.
    @inlinable
    public static func byte(after escape: UInt8) -> UInt8? {
        switch escape {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): return escape
        case UInt8(ascii: "b"): return 0x08
        case UInt8(ascii: "f"): return 0x0C
        case UInt8(ascii: "n"): return 0x0A
        case UInt8(ascii: "r"): return 0x0D
        case UInt8(ascii: "t"): return 0x09
        default: return nil
        }
    }
}
