import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An IP address as 128 bits; an IPv4 address is held as its IPv4-mapped IPv6 form
/// (`::ffff:a.b.c.d`), so `192.0.2.1` and `::ffff:192.0.2.1` are the same client.
public struct IPAddress: Hashable, Sendable, CustomStringConvertible {
    /// The first 64 bits, network order.
    public let high: UInt64
    /// The last 64 bits, network order.
    public let low: UInt64

    /// The address with these 128 bits.
    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Parses an IPv4 (`192.0.2.1`) or IPv6 (`2001:db8::1`) address in its text form; nil for
    /// anything else (a name, a port, a zone, brackets). Allocates nothing.
    public init?(_ text: some StringProtocol) {
        let utf8 = text.utf8
        guard !utf8.isEmpty, utf8.count < 64 else { return nil }
        let isV6 = utf8.contains(UInt8(ascii: ":"))
        let parsed: (UInt64, UInt64)? = withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { chars -> (UInt64, UInt64)? in
            var n = 0
            for byte in utf8 {
                chars[n] = CChar(bitPattern: byte)
                n += 1
            }
            chars[n] = 0
            return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16) { out -> (UInt64, UInt64)? in
                guard inet_pton(isV6 ? AF_INET6 : AF_INET, chars.baseAddress, out.baseAddress) == 1 else { return nil }
                if !isV6 {
                    let v4 = out[0..<4].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                    return (0, 0x0000_FFFF_0000_0000 | v4)
                }
                return (out[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }, out[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
            }
        }
        guard let parsed else { return nil }
        high = parsed.0
        low = parsed.1
    }

    /// Whether this is an IPv4 address (held IPv4-mapped).
    public var isIPv4: Bool { high == 0 && low >> 32 == 0xFFFF }

    /// The key one client is capped and limited by: an IPv4 address itself, an IPv6 address's
    /// /64 (the prefix a single subscriber commonly holds), as text; `text` itself when it is
    /// not an address.
    static func capKey(_ text: String) -> String {
        guard let address = IPAddress(text), !address.isIPv4 else { return text }
        return IPAddress(high: address.high, low: 0).description + "/64"
    }

    /// The text form (dotted quad for IPv4, RFC 5952 for IPv6).
    public var description: String {
        var bytes = [UInt8](repeating: 0, count: 16)
        for i in 0..<8 {
            bytes[i] = UInt8(truncatingIfNeeded: high >> (56 - 8 * UInt64(i)))
            bytes[8 + i] = UInt8(truncatingIfNeeded: low >> (56 - 8 * UInt64(i)))
        }
        var text = [CChar](repeating: 0, count: 64)
        let family = isIPv4 ? AF_INET : AF_INET6
        let source = isIPv4 ? Array(bytes[12..<16]) : bytes
        guard inet_ntop(family, source, &text, socklen_t(text.count)) != nil else { return "?" }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// The proxies whose `X-Forwarded-For` the gateway believes: single addresses or CIDR ranges,
/// IPv4 and IPv6 (`GATEHOUSE_TRUSTED_PROXIES`). Empty: the client is always the TCP peer.
public struct TrustedProxies: Sendable, Equatable {
    /// One range: the addresses whose first `prefix` bits (of 128; IPv4 ranges count 96 more)
    /// equal `base`'s.
    struct Range: Sendable, Equatable {
        var base: IPAddress
        var prefix: Int

        func contains(_ address: IPAddress) -> Bool {
            let highMask: UInt64 = prefix >= 64 ? .max : (prefix == 0 ? 0 : .max << UInt64(64 - prefix))
            let lowMask: UInt64 = prefix <= 64 ? 0 : .max << UInt64(128 - prefix)
            return (address.high & highMask) == (base.high & highMask) && (address.low & lowMask) == (base.low & lowMask)
        }
    }

    let ranges: [Range]

    /// No trusted proxy.
    public static let none = TrustedProxies(ranges: [])

    init(ranges: [Range]) { self.ranges = ranges }

    /// Parses entries such as `10.0.0.1`, `10.0.0.0/8`, `2001:db8::/32`, `::1`; throws a message
    /// naming the first entry that is not one.
    public init(_ entries: [String]) throws(TrustedProxiesError) {
        var ranges: [Range] = []
        for entry in entries {
            let parts = entry.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let address = IPAddress(parts[0]) else { throw TrustedProxiesError(entry: entry) }
            let width = address.isIPv4 ? 32 : 128
            var prefix = width
            if parts.count == 2 {
                guard let bits = Int(parts[1]), (0...width).contains(bits), parts[1].allSatisfy(\.isASCII) else {
                    throw TrustedProxiesError(entry: entry)
                }
                prefix = bits
            }
            ranges.append(Range(base: address, prefix: address.isIPv4 ? prefix + 96 : prefix))
        }
        self.ranges = ranges
    }

    /// Whether no proxy is trusted.
    public var isEmpty: Bool { ranges.isEmpty }

    /// Whether `address` is one of the trusted proxies.
    public func contains(_ address: IPAddress) -> Bool {
        ranges.contains { $0.contains(address) }
    }

    /// The most entries of `X-Forwarded-For` looked at, from the right.
    static let maxHops = 16

    /// Whether the TCP peer `peer` (textual address) is one of the trusted proxies.
    func isTrusted(peer: String) -> Bool {
        guard !ranges.isEmpty, let address = IPAddress(peer) ?? peer.split(separator: "%").first.flatMap({ IPAddress($0) }) else {
            return false
        }
        return contains(address)
    }

    /// The client of a request from `peer` carrying these `X-Forwarded-For` values (in order):
    /// the peer, unless it is a trusted proxy; then, from the right, the first forwarded entry
    /// that is not a trusted proxy. An entry that is not an IP address stops the walk at the
    /// last address known (that of the proxy that wrote it). Text and parsed address.
    func client(peer: String, forwardedFor: [String]) -> (text: String, address: IPAddress?) {
        // A link-local peer may carry its zone (`fe80::1%eth0`): the address is what counts.
        guard let peerAddress = IPAddress(peer) ?? peer.split(separator: "%").first.flatMap({ IPAddress($0) }) else {
            return (peer, nil)
        }
        guard !ranges.isEmpty, contains(peerAddress) else { return (peer, peerAddress) }
        var current = (text: peer, address: peerAddress)
        var hops = 0
        for value in forwardedFor.reversed() {
            for entry in value.split(separator: ",", omittingEmptySubsequences: false).reversed() {
                hops += 1
                guard hops <= Self.maxHops, let found = Self.forwardedAddress(entry) else { return current }
                current = found
                if !contains(found.1) { return current }
            }
        }
        return current
    }

    /// One `X-Forwarded-For` entry: an address, possibly `[v6]:port` or `v4:port`.
    static func forwardedAddress(_ entry: Substring) -> (String, IPAddress)? {
        var text = entry.trimmingCharacters(in: .whitespaces)[...]
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            text = text[text.index(after: text.startIndex)..<close]
        } else if let colon = text.firstIndex(of: ":"), text.contains("."), text[text.index(after: colon)...].allSatisfy(\.isNumber) {
            text = text[..<colon]
        }
        guard let address = IPAddress(text) else { return nil }
        return (String(text), address)
    }
}

/// A `GATEHOUSE_TRUSTED_PROXIES` entry that is not an IP address or CIDR range.
public struct TrustedProxiesError: Error, CustomStringConvertible {
    /// The entry as given.
    public let entry: String
    /// What is wrong.
    public var description: String { "'\(entry)' is not an IP address or CIDR range (like 10.0.0.0/8 or 2001:db8::/32)" }
}
