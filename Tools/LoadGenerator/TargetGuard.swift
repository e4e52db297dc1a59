import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A parsed and checked target: where the load goes.
public struct Target: Sendable, Equatable {
    /// Base URL without a trailing slash, e.g. `http://127.0.0.1:8080`.
    public var baseURL: String
    /// The host of the URL, without IPv6 brackets.
    public var host: String
    /// The addresses `host` resolved to (empty when the check was skipped with `allowRemote`).
    public var addresses: [String]

    /// The full URL of `path` (which starts with `/`).
    public func url(_ path: String) -> String { baseURL + path }
}

/// Refuses targets that are not this machine unless the user explicitly allows remote ones.
///
/// The host is resolved (numeric hosts without any lookup) and *every* address it resolves to must
/// be loopback: 127.0.0.0/8, ::1 or an IPv4-mapped 127.x address. This runs before any HTTP client
/// exists, so a refused target never receives a packet. Redirects are disabled in the client, so a
/// loopback server cannot bounce the load elsewhere either.
public enum TargetGuard {
    /// Parses `text` and, unless `allowRemote`, refuses it
    /// when any address its host resolves to is not loopback.
    public static func check(url text: String, allowRemote: Bool) throws -> Target {
        guard let components = URLComponents(string: text),
              let scheme = components.scheme?.lowercased(),
              scheme == "http" || scheme == "https"
        else {
            throw LoadError.invalidURL("'\(text)' (expected http://host[:port])")
        }
        var host = components.host ?? ""
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw LoadError.invalidURL("'\(text)' has no host") }
        guard components.query == nil, components.fragment == nil else {
            throw LoadError.invalidURL("'\(text)' must not have a query or fragment")
        }
        var base = text
        while base.hasSuffix("/") { base.removeLast() }
        if allowRemote {
            return Target(baseURL: base, host: host, addresses: [])
        }
        let addresses: [ResolvedAddress]
        do {
            addresses = try resolve(host)
        } catch {
            throw LoadError.remoteTargetRefused(host: host, reason: "it could not be resolved (\(error))")
        }
        guard !addresses.isEmpty else {
            throw LoadError.remoteTargetRefused(host: host, reason: "it resolved to no address")
        }
        if let remote = addresses.first(where: { !$0.isLoopback }) {
            throw LoadError.remoteTargetRefused(host: host, reason: "it resolves to \(remote.text), which is not loopback")
        }
        return Target(baseURL: base, host: host, addresses: addresses.map(\.text))
    }

    /// One address from the resolver, as raw bytes (4 or 16) and text.
    public struct ResolvedAddress: Sendable, Equatable {
        /// The address: 4 bytes for IPv4, 16 for IPv6.
        public var bytes: [UInt8]
        /// The address in numeric text form.
        public var text: String

        /// Whether this address is this machine (see `isLoopback(_:)`).
        public var isLoopback: Bool { TargetGuard.isLoopback(bytes) }
    }

    /// 127.0.0.0/8, ::1, and ::ffff:127.x.y.z.
    public static func isLoopback(_ bytes: [UInt8]) -> Bool {
        switch bytes.count {
        case 4:
            return bytes[0] == 127
        case 16:
            if bytes[0..<15].allSatisfy({ $0 == 0 }) && bytes[15] == 1 { return true }
            if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF { return bytes[12] == 127 }
            return false
        default:
            return false
        }
    }

    struct ResolveError: Error, CustomStringConvertible {
        var code: Int32
        var description: String { String(cString: gai_strerror(code)) }
    }

    /// getaddrinfo for TCP; numeric hosts are converted without a lookup.
    public static func resolve(_ host: String) throws -> [ResolvedAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Darwin)
        hints.ai_socktype = SOCK_STREAM
        #else
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, nil, &hints, &list)
        guard status == 0 else { throw ResolveError(code: status) }
        defer { freeaddrinfo(list) }

        var result: [ResolvedAddress] = []
        var node = list
        while let info = node {
            defer { node = info.pointee.ai_next }
            guard let sockaddr = info.pointee.ai_addr else { continue }
            switch info.pointee.ai_family {
            case AF_INET:
                var address = sockaddr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
                let bytes = withUnsafeBytes(of: &address) { Array($0) }
                result.append(ResolvedAddress(bytes: bytes, text: numericText(AF_INET, bytes)))
            case AF_INET6:
                var address = sockaddr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
                let bytes = withUnsafeBytes(of: &address) { Array($0) }
                result.append(ResolvedAddress(bytes: bytes, text: numericText(AF_INET6, bytes)))
            default:
                continue
            }
        }
        return result
    }

    private static func numericText(_ family: Int32, _ bytes: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let text = bytes.withUnsafeBytes { raw in
            inet_ntop(family, raw.baseAddress, &buffer, socklen_t(buffer.count))
        }
        guard text != nil else { return "?" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
