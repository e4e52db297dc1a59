import Foundation
import GatehouseContracts
import GatehouseRPC
import IdentityCore
import Logging
import TokenCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `gatehouse healthcheck`: is the role running on this host answering? Used by the Docker
/// HEALTHCHECK and by compose's `depends_on: condition: service_healthy`, so it needs nothing
/// but the binary (the runtime image has no curl) and the role's own configuration.
///
/// - gateway (and serve, whose services are in-process): `GET /healthz` on the HTTP port answers
///   200 (liveness only: a gateway whose services are down is still healthy, so it is not
///   restarted for their sake).
/// - identity, token: one RPC call to the role's bind endpoint answers within the timeout. Any
///   reply, even an error such as `not_found`, means up; `unavailable` or `deadline_exceeded`
///   means down.
public enum Healthcheck {
    /// The role to check: `gateway` and `serve` over HTTP, `identity` and `token` over RPC.
    public enum Role: String, Sendable, CaseIterable {
        case gateway, identity, token, serve
    }

    /// Why the role is considered down, as one line for the operator.
    public struct Failure: Error, CustomStringConvertible {
        /// The reason, e.g. the status the gateway answered.
        public let description: String
        /// A failure with `description`.
        public init(_ description: String) { self.description = description }
    }

    /// Checks `role` using the endpoints of `config`; returns a one-line success message or
    /// throws `Failure` (or `ConfigError` for a bad value).
    ///
    /// - Parameter curveClientKeys: CURVE keys for the RPC probe when the services require
    ///   CURVE (`LinkSecurity.selfProbeKeys`: the role's own pair); nil for plain TCP.
    public static func check(
        role: Role, config: Config, curveClientKeys: CurveClientKeys? = nil, timeout: Duration = .seconds(1)
    ) async throws -> String {
        switch role {
        case .gateway, .serve:
            let host = loopbackHost(try config.required(ConfigTable.httpHost))
            let port = try config.int(ConfigTable.httpPort, in: 1...65_535)
            let status = try httpStatus(host: host, port: port, path: "/healthz", timeout: timeout)
            guard status == 200 else { throw Failure("\(role.rawValue): GET http://\(host):\(port)/healthz answered \(status), not 200") }
            return "\(role.rawValue): up (GET http://\(host):\(port)/healthz → 200)"
        case .identity:
            let endpoint = loopbackEndpoint(try config.endpoint(ConfigTable.identityBind))
            try await probeRPC(endpoint: endpoint, role: role, curveClientKeys: curveClientKeys, timeout: timeout)
            return "identity: up (\(endpoint) answered)"
        case .token:
            let endpoint = loopbackEndpoint(try config.endpoint(ConfigTable.tokenBind))
            try await probeRPC(endpoint: endpoint, role: role, curveClientKeys: curveClientKeys, timeout: timeout)
            return "token: up (\(endpoint) answered)"
        }
    }

    /// The role of a `gatehouse ROLE ...` command line in `/proc/PID/cmdline` form (NUL-separated),
    /// or nil. In a container PID 1 is the role itself, so `docker run IMAGE identity` gets a
    /// working HEALTHCHECK without GATEHOUSE_ROLE.
    public static func role(commandLine: [UInt8]) -> Role? {
        let words = commandLine.split(separator: 0, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        guard words.count >= 2, words[0].split(separator: "/").last == "gatehouse" else { return nil }
        return Role(rawValue: words[1])
    }

    /// `0.0.0.0`, `*` and empty hosts (wildcard binds) become `127.0.0.1`; `::` becomes `::1`.
    public static func loopbackHost(_ host: String) -> String {
        switch host {
        case "0.0.0.0", "*", "": return "127.0.0.1"
        case "::", "[::]": return "::1"
        default: return host
        }
    }

    /// A bind endpoint turned into one a client on the same host can connect to:
    /// `tcp://0.0.0.0:7001` and `tcp://*:7001` → `tcp://127.0.0.1:7001`. Other transports unchanged.
    public static func loopbackEndpoint(_ bind: String) -> String {
        let prefix = "tcp://"
        guard bind.hasPrefix(prefix), let colon = bind.lastIndex(of: ":"), colon > bind.index(bind.startIndex, offsetBy: prefix.count) else {
            return bind
        }
        let host = String(bind[bind.index(bind.startIndex, offsetBy: prefix.count)..<colon])
        let mapped = loopbackHost(host)
        let bracketed = mapped.contains(":") && !mapped.hasPrefix("[") ? "[\(mapped)]" : mapped
        return prefix + (mapped == host ? host : bracketed) + String(bind[colon...])
    }

    /// One cheap call (identity: `getUser` of an id that does not exist; token: `jwks`).
    ///
    /// - Parameter curveClientKeys: CURVE keys when the service requires them (nil: plain TCP).
    public static func probeRPC(endpoint: String, role: Role, curveClientKeys: CurveClientKeys?, timeout: Duration) async throws {
        var configuration = RPCClient.Configuration(endpoint: endpoint, defaultTimeout: timeout)
        configuration.curve = curveClientKeys
        configuration.idempotentAttempts = 1
        var logger = Logger(label: "gatehouse.healthcheck")
        logger.logLevel = .critical
        let client: RPCClient
        do { client = try RPCClient(configuration: configuration, logger: logger) } catch {
            throw Failure("\(role.rawValue): cannot open a client for \(endpoint): \(error)")
        }
        var failure: Failure?
        do {
            switch role {
            case .identity: _ = try await client.call(IdentityAPI.getUser, UserIDRequest(userID: "healthcheck-probe"), timeout: timeout)
            case .token: _ = try await client.call(TokenAPI.jwks, Empty(), timeout: timeout)
            case .gateway, .serve: break
            }
        } catch let error as RPCError where [.unavailable, .deadlineExceeded, .cancelled].contains(error.code) {
            failure = Failure("\(role.rawValue): no answer from \(endpoint) within \(timeout) (\(error.code.rawValue))")
        } catch is RPCError {
            // An error reply is still a reply: the service is up.
        } catch {
            failure = Failure("\(role.rawValue): \(endpoint): \(error)")
        }
        await client.close()
        if let failure { throw failure }
    }

    /// The status code of `GET path` over a plain blocking socket (HTTP/1.1, `Connection: close`).
    public static func httpStatus(host: String, port: Int, path: String, timeout: Duration) throws -> Int {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0, let first = list else {
            throw Failure("gateway: cannot resolve \(host): \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(first) }
        let seconds = timeout.components.seconds
        let micros = timeout.components.attoseconds / 1_000_000_000_000
        var limit = timeval(tv_sec: Int(seconds), tv_usec: .init(micros))
        var lastError = "no address"
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let info = cursor {
            cursor = info.pointee.ai_next
            let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
            guard fd >= 0 else { lastError = String(cString: strerror(errno)); continue }
            defer { close(fd) }
            // On Linux SO_SNDTIMEO also bounds connect().
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            guard connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 else {
                lastError = "connect to \(host):\(port): \(String(cString: strerror(errno)))"
                continue
            }
            let hostHeader = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
            let request = Array("GET \(path) HTTP/1.1\r\nHost: \(hostHeader)\r\nUser-Agent: gatehouse-healthcheck\r\nConnection: close\r\n\r\n".utf8)
            var sent = 0
            while sent < request.count {
                let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard n > 0 else { throw Failure("gateway: sending to \(host):\(port) failed: \(String(cString: strerror(errno)))") }
                sent += n
            }
            var response: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 1024)
            while !response.contains(0x0A), response.count < 8192 {
                let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if n == 0 { break }
                guard n > 0 else { throw Failure("gateway: no answer from \(host):\(port) within \(timeout)") }
                response.append(contentsOf: buffer[0..<n])
            }
            // "HTTP/1.1 200 OK"
            let statusLine = String(decoding: response.prefix { $0 != 0x0D && $0 != 0x0A }, as: UTF8.self)
            let parts = statusLine.split(separator: " ")
            guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), let status = Int(parts[1]) else {
                throw Failure("gateway: \(host):\(port) did not answer HTTP (\(statusLine.prefix(40)))")
            }
            return status
        }
        throw Failure("gateway: \(lastError)")
    }
}
