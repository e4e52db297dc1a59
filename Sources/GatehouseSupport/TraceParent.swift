import Synchronization

/// A W3C Trace Context `traceparent` of version 00:
/// `00-<trace id: 32 hex>-<parent id: 16 hex>-<flags: 2 hex>`, lowercase, 55 characters.
///
/// Gatehouse records no spans of its own: it carries the value it received (or started) through
/// every hop unchanged, and writes the trace id into its log lines (`trace_id=`), so one
/// request can be followed across the gateway and both services. A plain value (three integers
/// and a byte): binding it to a task, or writing it into an RPC header, allocates nothing.
public struct TraceParent: Sendable, Hashable, CustomStringConvertible {
    /// The trace id's first 64 bits.
    public let traceIDHigh: UInt64
    /// The trace id's last 64 bits. The trace id is never all zero.
    public let traceIDLow: UInt64
    /// The id of the caller's span; never zero.
    public let parentID: UInt64
    /// The trace flags (bit 0: sampled).
    public let flags: UInt8

    /// A trace parent from its parts; nil when the trace id or the parent id is all zero.
    public init?(traceIDHigh: UInt64, traceIDLow: UInt64, parentID: UInt64, flags: UInt8) {
        guard traceIDHigh | traceIDLow != 0, parentID != 0 else { return nil }
        self.traceIDHigh = traceIDHigh
        self.traceIDLow = traceIDLow
        self.parentID = parentID
        self.flags = flags
    }

    /// The length of a version-00 `traceparent`.
    public static let length = 55

    /// Parses a `traceparent` header value strictly: exactly version `00`, lowercase hex digits
    /// in the right places, dashes between, a trace id and a parent id that are not all zero.
    /// Anything else (another version, upper case, extra characters, whitespace) is nil.
    public init?(_ text: String) {
        var text = text
        guard let parsed = text.withUTF8({ TraceParent(utf8: UnsafeRawBufferPointer($0)) }) else { return nil }
        self = parsed
    }

    /// Parses the UTF-8 bytes of a `traceparent` value; see `init?(_:)`.
    public init?(utf8 bytes: UnsafeRawBufferPointer) {
        guard bytes.count == Self.length, bytes[0] == 0x30, bytes[1] == 0x30,
            bytes[2] == 0x2D, bytes[35] == 0x2D, bytes[52] == 0x2D
        else { return nil }
        func hex(_ start: Int, _ count: Int) -> UInt64? {
            var value: UInt64 = 0
            for i in start..<(start + count) {
                let b = bytes[i]
                let digit: UInt8
                switch b {
                case 0x30...0x39: digit = b - 0x30
                case 0x61...0x66: digit = b - 0x61 + 10
                default: return nil
                }
                value = value << 4 | UInt64(digit)
            }
            return value
        }
        guard let high = hex(3, 16), let low = hex(19, 16), let parent = hex(36, 16), let flags = hex(53, 2) else { return nil }
        self.init(traceIDHigh: high, traceIDLow: low, parentID: parent, flags: UInt8(flags))
    }

    /// A new trace: a random trace id and parent id, flags `00`.
    ///
    /// Random enough to be unique, not secret: a process-wide random key and a counter run
    /// through a bijective mix (SplitMix64's finalizer), so no two values of one process
    /// repeat and no system call is made per request. Trace ids only correlate log lines.
    public static func random() -> TraceParent {
        let n = counter.wrappingAdd(1, ordering: .relaxed).newValue
        let step = n &* 0x9E37_79B9_7F4A_7C15
        let high = mix(keys.0 &+ step), low = mix(keys.1 &+ step), parent = mix(keys.2 &+ step)
        // All zero has a chance of 2^-128 (and 2^-64 for the parent id); never mind it, never emit it.
        return TraceParent(traceIDHigh: high, traceIDLow: low | (high == 0 ? 1 : 0), parentID: parent == 0 ? 1 : parent, flags: 0)!
    }

    private static let keys: (UInt64, UInt64, UInt64) = {
        var generator = SystemRandomNumberGenerator()
        return (generator.next(), generator.next(), generator.next())
    }()
    private static let counter = Atomic<UInt64>(0)

    private static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Lends the 55 bytes of the header value to `body` (from the stack, no allocation).
    public func withUTF8<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeTemporaryAllocation(byteCount: Self.length, alignment: 1) { buffer in
            let base = buffer.baseAddress!
            base.storeBytes(of: 0x30, toByteOffset: 0, as: UInt8.self)
            base.storeBytes(of: 0x30, toByteOffset: 1, as: UInt8.self)
            base.storeBytes(of: 0x2D, toByteOffset: 2, as: UInt8.self)
            Self.writeHex(traceIDHigh, digits: 16, to: base + 3)
            Self.writeHex(traceIDLow, digits: 16, to: base + 19)
            base.storeBytes(of: 0x2D, toByteOffset: 35, as: UInt8.self)
            Self.writeHex(parentID, digits: 16, to: base + 36)
            base.storeBytes(of: 0x2D, toByteOffset: 52, as: UInt8.self)
            Self.writeHex(UInt64(flags), digits: 2, to: base + 53)
            return try body(UnsafeRawBufferPointer(start: base, count: Self.length))
        }
    }

    /// The header value, `00-…-…-…`.
    public var description: String {
        withUTF8 { String(decoding: $0, as: UTF8.self) }
    }

    /// The trace id as 32 lowercase hex digits, as log lines carry it (`trace_id=`).
    public var traceID: String {
        String(unsafeUninitializedCapacity: 32) { buffer in
            let base = UnsafeMutableRawPointer(buffer.baseAddress!)
            Self.writeHex(traceIDHigh, digits: 16, to: base)
            Self.writeHex(traceIDLow, digits: 16, to: base + 16)
            return 32
        }
    }

    private static func writeHex(_ value: UInt64, digits: Int, to base: UnsafeMutableRawPointer) {
        let hex: StaticString = "0123456789abcdef"
        for i in 0..<digits {
            let nibble = Int((value >> UInt64(4 * (digits - 1 - i))) & 0xF)
            base.storeBytes(of: hex.utf8Start[nibble], toByteOffset: i, as: UInt8.self)
        }
    }
}

/// The trace of the work the current task does on behalf of a request: bound by the gateway
/// for each HTTP request and by an RPC server for each request it serves; an RPC client sends
/// it with every call made from that task, and log lines carry its trace id.
public enum TraceContext {
    /// The current request's trace, if any.
    @TaskLocal public static var current: TraceParent?
}
