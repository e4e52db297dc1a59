import Foundation

/// Where and how `SMTPTransport` hands mail to a relay.
public struct SMTPConfiguration: Sendable, Equatable {
    /// How the connection is protected.
    public enum TLSMode: String, Sendable, Equatable, CaseIterable {
        /// Plain text throughout (credentials are then only sent to a loopback host).
        case none
        /// Plain text upgraded with `STARTTLS` before anything else is sent (port 587); refused if
        /// the relay does not offer it.
        case startTLS
        /// TLS from the first byte (port 465).
        case implicit
    }

    /// The relay's host name or IP address. A name is verified against the certificate's DNS
    /// names, an address against its IP addresses.
    public var host: String
    /// The relay's port.
    public var port: Int
    /// Plain, STARTTLS or implicit TLS.
    public var tls: TLSMode
    /// A PEM file of CA certificates added to the system's trust roots (a private relay's CA), or nil.
    public var caFile: String?
    /// The login for `AUTH PLAIN` or `AUTH LOGIN`, or nil for no authentication.
    public var username: String?
    /// The password for `username` (never logged, never in an error).
    public var password: String?
    /// The name this client gives in `EHLO`.
    public var heloName: String
    /// How long opening the TCP connection may take (each reply after it, the greeting included, has `commandTimeout`).
    public var connectTimeout: Duration
    /// How long the relay may take to answer one command.
    public var commandTimeout: Duration

    /// A configuration; the defaults suit a submission port (587) with STARTTLS.
    public init(
        host: String, port: Int = 587, tls: TLSMode = .startTLS, caFile: String? = nil, username: String? = nil,
        password: String? = nil, heloName: String = "localhost", connectTimeout: Duration = .seconds(10),
        commandTimeout: Duration = .seconds(30)
    ) {
        self.host = host
        self.port = port
        self.tls = tls
        self.caFile = caFile
        self.username = username
        self.password = password
        self.heloName = heloName
        self.connectTimeout = connectTimeout
        self.commandTimeout = commandTimeout
    }

    /// Whether `host` is a loopback address or `localhost` (where credentials may travel in plain text).
    public var hostIsLoopback: Bool { Self.isLoopback(host) }

    /// Whether `host` names this machine over loopback: `localhost` or a name under `.localhost`
    /// (RFC 6761), an IPv4 address in 127.0.0.0/8, `::1` or an IPv4-mapped 127 address, with or
    /// without brackets. The one check for start-up (`MailSettings`) and the client.
    public static func isLoopback(_ host: String) -> Bool {
        var name = host.lowercased().trimmingCharacters(in: .whitespaces)
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name.hasSuffix(".") { name.removeLast() }
        if name == "localhost" || name.hasSuffix(".localhost") { return true }
        var v4 = in_addr()
        if inet_pton(AF_INET, name, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { $0[0] == 127 }
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, name, &v6) == 1 else { return false }
        return withUnsafeBytes(of: &v6) { bytes in
            let loopback = bytes[0..<15].allSatisfy { $0 == 0 } && bytes[15] == 1
            let mapped = bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF && bytes[12] == 127
            return loopback || mapped
        }
    }

    /// Whether `host` is an IP address (verified against the certificate's IP addresses, never sent as SNI).
    var hostIsIPAddress: Bool {
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return host.contains(":") || (parts.count == 4 && parts.allSatisfy { UInt8($0) != nil })
    }

    /// Why this configuration cannot be used, or nil.
    var problem: String? {
        if host.isEmpty { return "no SMTP host is configured" }
        if !(1...65535).contains(port) { return "the SMTP port \(port) is out of range" }
        if (username == nil) != (password == nil) { return "an SMTP username needs a password, and a password a username" }
        if heloName.isEmpty || heloName.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value >= 0x7F }) {
            return "the EHLO name must be one word of printable ASCII"
        }
        if let username, username.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            return "the SMTP username contains a control character"
        }
        if username != nil, tls == .none, !hostIsLoopback {
            return "refusing to send SMTP credentials without TLS to \(host), which is not a loopback address; use STARTTLS or implicit TLS"
        }
        return nil
    }
}
