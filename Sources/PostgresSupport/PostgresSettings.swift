import Foundation
import NIOSSL
import PostgresNIO

/// Where a PostgreSQL store lives (issue 24): `GATEHOUSE_DATABASE_URL`, a
/// `postgres://user[:password]@host[:port]/database[?sslmode=…]` URL, with the password from a
/// file (`GATEHOUSE_DATABASE_PASSWORD_FILE`) rather than the URL when it is a secret.
///
/// `sslmode` follows libpq's names: `disable`, `prefer` (TLS when the server offers it, no
/// certificate check), `require` (TLS, no certificate check), `verify-full` (TLS, the server's
/// certificate checked against the system roots or `sslrootcert`, and its name). The default is
/// `verify-full` off loopback and `disable` on it.
public struct PostgresSettings: Sendable, Equatable, CustomStringConvertible {
    /// How the connection is protected.
    public enum TLSMode: String, Sendable, Equatable, CaseIterable {
        case disable, prefer, require
        case verifyFull = "verify-full"
    }

    /// The server's host name or address.
    public var host: String
    /// The server's port.
    public var port: Int
    /// The role to connect as.
    public var username: String
    /// The role's password; nil for none (trust, or a client certificate).
    public var password: String?
    /// The database.
    public var database: String
    /// How the connection is protected.
    public var tls: TLSMode
    /// A PEM file of the certificate authorities `verify-full` trusts (`sslrootcert`); nil: the system's.
    public var rootCertificateFile: String?

    /// Reads `url`; `passwordFile` (its first line, read with `readFile`) replaces a password in
    /// the URL. Throws a `PostgresSettingsError` saying what to fix, never echoing a password.
    public init(
        url text: String, passwordFile: String? = nil, readFile: (String) -> Data? = { FileManager.default.contents(atPath: $0) }
    ) throws(PostgresSettingsError) {
        guard let url = URLComponents(string: text), let scheme = url.scheme, ["postgres", "postgresql"].contains(scheme) else {
            throw PostgresSettingsError("the database URL must be postgres://user@host:port/database (postgresql:// works too)")
        }
        guard let host = url.host, !host.isEmpty else { throw PostgresSettingsError("the database URL has no host") }
        guard let user = url.user, !user.isEmpty else { throw PostgresSettingsError("the database URL has no user (postgres://USER@host/db)") }
        let database = url.path.hasPrefix("/") ? String(url.path.dropFirst()) : url.path
        guard !database.isEmpty, !database.contains("/") else {
            throw PostgresSettingsError("the database URL names no database (postgres://user@host/DATABASE)")
        }
        self.host = host
        self.port = url.port ?? 5432
        guard (1...65_535).contains(port) else { throw PostgresSettingsError("the database URL's port is out of range") }
        // URLComponents decodes user, password and path once already.
        self.username = user
        self.password = url.password
        self.database = database
        let loopback = ["127.0.0.1", "::1", "localhost"].contains(host.lowercased())
        tls = loopback ? .disable : .verifyFull
        for item in url.queryItems ?? [] {
            switch item.name {
            case "sslmode":
                guard let value = item.value, let mode = TLSMode(rawValue: value) else {
                    throw PostgresSettingsError("sslmode must be one of \(TLSMode.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                tls = mode
            case "sslrootcert":
                rootCertificateFile = item.value
            default:
                throw PostgresSettingsError("the database URL has an unknown option \(item.name.debugDescription) (known: sslmode, sslrootcert)")
            }
        }
        if let passwordFile {
            guard let data = readFile(passwordFile) else {
                throw PostgresSettingsError("the database password file \(passwordFile) cannot be read")
            }
            let line = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
            guard !line.isEmpty else { throw PostgresSettingsError("the database password file \(passwordFile) is empty") }
            password = line
        }
    }

    /// The client configuration: TLS as `tls` says, at most `maximumConnections` connections.
    public func clientConfiguration(maximumConnections: Int = 20) throws -> PostgresClient.Configuration {
        let tlsOption: PostgresClient.Configuration.TLS
        switch tls {
        case .disable:
            tlsOption = .disable
        case .prefer, .require:
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.certificateVerification = .none
            tlsOption = tls == .prefer ? .prefer(configuration) : .require(configuration)
        case .verifyFull:
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.certificateVerification = .fullVerification
            if let rootCertificateFile {
                configuration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(rootCertificateFile))
            }
            tlsOption = .require(configuration)
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: tlsOption)
        configuration.options.maximumConnections = maximumConnections
        configuration.options.connectTimeout = .seconds(5)
        // Bounds on what one stuck caller can hold, set for every connection at its start: a
        // statement or a lock wait ends after 5 s, a transaction left open by a frozen or
        // partitioned instance after 10 s (its locks, e.g. the revocation counter, go with it).
        // Every call has a shorter deadline; these only stop a lost caller from holding others up.
        configuration.options.additionalStartupParameters = Self.sessionLimits
        return configuration
    }

    /// The session settings every connection starts with (see `clientConfiguration`).
    public static let sessionLimits = [
        ("statement_timeout", "5000"), ("lock_timeout", "5000"), ("idle_in_transaction_session_timeout", "10000"),
    ]

    /// The URL without its password (for logs).
    public var description: String {
        "postgres://\(username)@\(host):\(port)/\(database)?sslmode=\(tls.rawValue)"
    }
}

/// A database URL or password file that cannot work, with what to change.
public struct PostgresSettingsError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What is wrong.
    public let message: String

    init(_ message: String) { self.message = message }

    /// The message.
    public var description: String { message }
}
