#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// An IPv4 or IPv6 socket address.
struct SocketAddress: Sendable {
    var storage: sockaddr_storage
    var length: socklen_t
    var family: Int32 { Int32(storage.ss_family) }

    /// A numeric IPv4 or IPv6 address (no lookup).
    init?(numeric host: String, port: UInt16) {
        let text = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr = v4
            self.init(address)
        } else if inet_pton(AF_INET6, text, &v6) == 1 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            address.sin6_addr = v6
            self.init(address)
        } else {
            return nil
        }
    }

    /// `address` (a `sockaddr_in` or `sockaddr_in6`) in a `sockaddr_storage`.
    private init<Address>(_ address: Address) {
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { raw in withUnsafeBytes(of: address) { raw.copyMemory(from: $0) } }
        self.storage = storage
        self.length = socklen_t(MemoryLayout<Address>.size)
    }

    /// The first address `host` resolves to (only for `--allow-remote` targets, which the guard
    /// did not resolve).
    static func resolve(host: String, port: UInt16) throws -> SocketAddress {
        guard let first = try? TargetGuard.resolve(host).first, let address = SocketAddress(numeric: first.text, port: port) else {
            throw LoadError.invalidURL("cannot resolve '\(host)'")
        }
        return address
    }
}
