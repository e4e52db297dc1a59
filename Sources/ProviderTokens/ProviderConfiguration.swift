import Foundation

/// One identity provider whose ID tokens Gatehouse accepts: where its keys are, which issuer
/// it signs as, which client ids (audiences) of ours it may issue tokens for, and how the nonce
/// appears in its tokens.
///
/// Build one with a preset (`apple(clientIDs:)`, `google(clientIDs:)`), with
/// `openIDConnect(name:issuer:clientIDs:allowInsecureLoopback:)` (keys found by discovery), or
/// with the full initializer (explicit issuers and JWKS address). Every address must be
/// `https`; plain `http` is accepted only when `allowInsecureLoopback` is set (test mode) and
/// the host is a loopback address, anything else is a `ProviderConfigurationError`.
public struct ProviderConfiguration: Sendable, Equatable {
    /// How a provider writes the app's nonce into the token's `nonce` claim.
    public enum NonceForm: String, Sendable, Equatable {
        /// The nonce as the app passed it (Google, most OpenID Connect providers).
        case raw
        /// `sha256(rawNonce)` as 64 lowercase hex digits (Sign in with Apple).
        case sha256Hex
    }

    /// Where the provider's signing keys come from.
    public enum KeySource: Sendable, Equatable {
        /// A JWKS document at a known address.
        case jwks(URL)
        /// `<issuer>/.well-known/openid-configuration`, whose `jwks_uri` names the JWKS and whose
        /// `issuer` must equal the configured one.
        case discovery(URL)
    }

    /// The name callers use to pick the provider (`apple`, `google`, or an operator's name).
    public let name: String
    /// The exact `iss` values accepted (Google signs as two).
    public let issuers: [String]
    /// Where the signing keys come from.
    public let keySource: KeySource
    /// The audiences accepted: iOS bundle id, services id, web client id, …
    public let clientIDs: [String]
    /// How the token carries the nonce.
    public let nonceForm: NonceForm
    /// Whether plain `http` on a loopback host was allowed (test mode).
    public let allowInsecureLoopback: Bool

    /// A provider with explicit issuers and key source; each address is checked (`https`, or
    /// `http` on loopback when `allowInsecureLoopback`).
    public init(
        name: String,
        issuers: [String],
        keySource: KeySource,
        clientIDs: [String],
        nonceForm: NonceForm = .raw,
        allowInsecureLoopback: Bool = false
    ) throws(ProviderConfigurationError) {
        guard !name.isEmpty else { throw ProviderConfigurationError("a provider needs a name") }
        guard !issuers.isEmpty, !issuers.contains(where: \.isEmpty) else {
            throw ProviderConfigurationError("provider \(name): at least one non-empty issuer is required")
        }
        let clients = clientIDs.filter { !$0.isEmpty }
        guard !clients.isEmpty else {
            throw ProviderConfigurationError(
                "provider \(name): at least one client id (audience) is required, e.g. the iOS bundle id or the web client id")
        }
        switch keySource {
        case .jwks(let url), .discovery(let url):
            try Self.checkAddress(url, provider: name, allowInsecureLoopback: allowInsecureLoopback)
        }
        self.init(
            unchecked: name, issuers: issuers, keySource: keySource, clientIDs: clients, nonceForm: nonceForm,
            allowInsecureLoopback: allowInsecureLoopback)
    }

    private init(
        unchecked name: String, issuers: [String], keySource: KeySource, clientIDs: [String], nonceForm: NonceForm,
        allowInsecureLoopback: Bool
    ) {
        self.name = name
        self.issuers = issuers
        self.keySource = keySource
        self.clientIDs = clientIDs
        self.nonceForm = nonceForm
        self.allowInsecureLoopback = allowInsecureLoopback
    }

    /// Sign in with Apple: issuer `https://appleid.apple.com`, keys at
    /// `https://appleid.apple.com/auth/keys`, the nonce as its SHA-256 in hex.
    public static func apple(clientIDs: [String]) throws(ProviderConfigurationError) -> ProviderConfiguration {
        try ProviderConfiguration(
            name: "apple", issuers: ["https://appleid.apple.com"],
            keySource: .jwks(URL(string: "https://appleid.apple.com/auth/keys")!), clientIDs: clientIDs, nonceForm: .sha256Hex)
    }

    /// Sign in with Google: issuers `https://accounts.google.com` and `accounts.google.com`,
    /// keys at `https://www.googleapis.com/oauth2/v3/certs`, the nonce as sent.
    public static func google(clientIDs: [String]) throws(ProviderConfigurationError) -> ProviderConfiguration {
        try ProviderConfiguration(
            name: "google", issuers: ["https://accounts.google.com", "accounts.google.com"],
            keySource: .jwks(URL(string: "https://www.googleapis.com/oauth2/v3/certs")!), clientIDs: clientIDs, nonceForm: .raw)
    }

    /// Any OpenID Connect provider by its issuer: the keys are found through
    /// `<issuer>/.well-known/openid-configuration`, and tokens must carry `iss` equal to `issuer`.
    public static func openIDConnect(
        name: String, issuer: String, clientIDs: [String], nonceForm: NonceForm = .raw, allowInsecureLoopback: Bool = false
    ) throws(ProviderConfigurationError) -> ProviderConfiguration {
        guard let url = URL(string: issuer), url.host != nil else {
            throw ProviderConfigurationError("provider \(name): the issuer \(issuer.debugDescription) is not an absolute URL")
        }
        guard url.query == nil, url.fragment == nil else {
            throw ProviderConfigurationError("provider \(name): an issuer URL has no query or fragment (OpenID Connect Discovery)")
        }
        return try ProviderConfiguration(
            name: name, issuers: [issuer], keySource: .discovery(url), clientIDs: clientIDs, nonceForm: nonceForm,
            allowInsecureLoopback: allowInsecureLoopback)
    }

    /// The discovery document's address for an issuer URL (`/.well-known/openid-configuration`
    /// appended to its path, as OpenID Connect Discovery 1.0 §4 says).
    static func discoveryURL(for issuer: URL) -> URL {
        var text = issuer.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        return URL(string: text + "/.well-known/openid-configuration")!
    }

    /// Refuses anything but `https`, or `http` on a loopback host when `allowInsecureLoopback`.
    static func checkAddress(_ url: URL, provider: String, allowInsecureLoopback: Bool) throws(ProviderConfigurationError) {
        guard let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else {
            throw ProviderConfigurationError("provider \(provider): \(url.absoluteString.debugDescription) is not an absolute URL")
        }
        switch scheme {
        case "https":
            return
        case "http":
            guard allowInsecureLoopback else {
                throw ProviderConfigurationError(
                    "provider \(provider): \(url.absoluteString) is plain http; provider keys are only fetched over https "
                        + "(http is allowed in test mode, on a loopback host)")
            }
            guard isLoopback(host: host) else {
                throw ProviderConfigurationError(
                    "provider \(provider): \(url.absoluteString) is plain http on a host that is not loopback; "
                        + "even in test mode http is allowed only on 127.0.0.1, ::1 or localhost")
            }
        default:
            throw ProviderConfigurationError("provider \(provider): \(url.absoluteString) must be an https URL")
        }
    }

    /// 127.0.0.0/8, `::1` and `localhost` (brackets around an IPv6 literal allowed).
    static func isLoopback(host: String) -> Bool {
        var name = host.lowercased()
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name == "localhost" || name == "::1" || name == "0:0:0:0:0:0:0:1" { return true }
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { part in
            !part.isEmpty && part.count <= 3 && part.allSatisfy(\.isASCII) && part.allSatisfy(\.isNumber) && Int(part)! <= 255
        }
    }
}

/// A provider configuration that cannot work (no client id, a plain-http address outside test
/// mode or off loopback, a discovery document naming another issuer, …), with a message saying
/// what to change.
public struct ProviderConfigurationError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What is wrong and how to fix it.
    public let message: String

    /// An error with `message`.
    public init(_ message: String) {
        self.message = message
    }

    /// The message.
    public var description: String { message }
}
