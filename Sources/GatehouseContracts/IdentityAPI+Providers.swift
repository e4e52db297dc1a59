import Foundation

// Wire messages of signing in with an identity provider (Sign in with Apple, Google, any OpenID
// Connect issuer), linking and unlinking provider identities, and re-authenticating with one
// (proto/identity.proto; issue 20).

/// A provider's ID token as the app received it, with the nonce it asked the provider to sign.
public struct ProviderCredential: Codable, Sendable, Hashable {
    /// The provider id: `apple.com`, `google.com`, or `oidc.<name>` for a configured OpenID
    /// Connect provider.
    public var provider: String
    /// The provider's ID token (a compact JWS), verified by the identity service.
    public var idToken: String
    /// The raw nonce the app generated (Apple's token carries its SHA-256 in hex, Google's the
    /// nonce itself); "" when the app sent none, and then the token must carry none.
    public var nonce: String

    /// A credential of `provider`.
    public init(provider: String, idToken: String, nonce: String = "") {
        self.provider = provider
        self.idToken = idToken
        self.nonce = nonce
    }

    enum CodingKeys: Int, CodingKey { case provider = 1, idToken = 2, nonce = 3 }
}

/// `identity.signInWithProvider` request: the five cases of seed 002. With no caller, sign in to
/// the user the identity is linked to, or create one (case 5). An anonymous caller gets the
/// identity linked (case 1), or migrates to the user it is linked to (case 2: see
/// `allowMigration`). A caller that is not anonymous gets it linked (case 3, recent login
/// required), or `credential_already_in_use` when another user has it (case 4).
public struct ProviderSignInRequest: Codable, Sendable, Hashable {
    /// The provider's token.
    public var credential: ProviderCredential
    /// The signed-in caller, when the request carried a bearer token.
    public var caller: AuthenticatedCaller?
    /// The user's name as the app got it from the provider (Apple sends it on the first
    /// authorisation only): sets `displayName` when the user has none; nil or "": unchanged.
    public var displayName: String?
    /// An anonymous caller's decision when the identity belongs to another user: nil answers
    /// `migration_required` with a resume handle; true or false migrates.
    public var allowMigration: Bool?
    /// The client signing in, stored with the new session.
    public var client: ClientInfo
    /// Link only (`POST /v1/me/providers`): a caller is required, and an identity linked to
    /// another user is `credential_already_in_use` even for an anonymous caller (no migration).
    public var linkOnly: Bool
    /// Sign in with Apple's authorization code, when the app sends it and the server has Apple's
    /// team key: exchanged at Apple's token endpoint for a refresh token, kept sealed and revoked
    /// when the account is deleted or the identity unlinked. "": none.
    public var authorizationCode: String
    /// The `redirect_uri` of the web authorization request the code came from (Sign in with
    /// Apple on the web, as the services id); "" for a code of a native app.
    public var redirectURI: String

    /// A provider sign-in with `credential`.
    public init(
        credential: ProviderCredential, caller: AuthenticatedCaller? = nil, displayName: String? = nil, allowMigration: Bool? = nil,
        client: ClientInfo = ClientInfo(), linkOnly: Bool = false, authorizationCode: String = "", redirectURI: String = ""
    ) {
        self.authorizationCode = authorizationCode
        self.redirectURI = redirectURI
        self.credential = credential
        self.caller = caller
        self.displayName = displayName
        self.allowMigration = allowMigration
        self.client = client
        self.linkOnly = linkOnly
    }

    enum CodingKeys: Int, CodingKey {
        case credential = 1, caller = 2, displayName = 3, allowMigration = 4, client = 5, linkOnly = 6, authorizationCode = 7, redirectURI = 8
    }
}

/// `identity.unlinkProvider` request: the caller removes a provider from its sign-in methods.
public struct UnlinkProviderRequest: Codable, Sendable, Hashable {
    /// The signed-in caller (recent login required).
    public var caller: AuthenticatedCaller
    /// The provider id to unlink (`apple.com`, `google.com`, `oidc.<name>`).
    public var provider: String
    /// The client unlinking (for the audit log).
    public var client: ClientInfo

    /// An unlink of `provider` from `caller`.
    public init(caller: AuthenticatedCaller, provider: String, client: ClientInfo = ClientInfo()) {
        self.caller = caller
        self.provider = provider
        self.client = client
    }

    enum CodingKeys: Int, CodingKey { case caller = 1, provider = 2, client = 3 }
}

/// `identity.reauthenticateWithProvider` request: the caller proves again who they are with a
/// fresh provider token of an identity linked to them, and gets a new session that replaces the
/// presented one.
public struct ProviderReauthenticateRequest: Codable, Sendable, Hashable {
    /// The signed-in caller, whose session the new one replaces.
    public var caller: AuthenticatedCaller
    /// The provider's token; its subject must be linked to the caller (`user_mismatch` otherwise).
    public var credential: ProviderCredential
    /// The client re-authenticating, stored with the new session.
    public var client: ClientInfo

    /// A re-authentication of `caller` with `credential`.
    public init(caller: AuthenticatedCaller, credential: ProviderCredential, client: ClientInfo = ClientInfo()) {
        self.caller = caller
        self.credential = credential
        self.client = client
    }

    enum CodingKeys: Int, CodingKey { case caller = 1, credential = 2, client = 3 }
}

/// `identity.appleNotification` request: a server-to-server notification as Apple posted it.
public struct AppleNotificationRequest: Codable, Sendable, Hashable {
    /// The POST body (`{"payload": "<JWS>"}`), at most 16 KiB.
    public var body: Data

    /// A notification with `body`.
    public init(body: Data) { self.body = body }

    enum CodingKeys: Int, CodingKey { case body = 1 }
}

/// `identity.appleNotification` reply: what the notification was and what was done.
public struct AppleNotificationResponse: Codable, Sendable, Hashable {
    /// `email-disabled`, `email-enabled`, `consent-revoked` or `account-delete`.
    public var type: String
    /// The user whose Apple identity it names; "" when no user has it.
    public var userID: String
    /// The sessions revoked (consent revoked, account deleted at Apple), for the gateway.
    public var revokedSessionIDs: [String]

    /// A reply.
    public init(type: String, userID: String = "", revokedSessionIDs: [String] = []) {
        self.type = type
        self.userID = userID
        self.revokedSessionIDs = revokedSessionIDs
    }

    enum CodingKeys: Int, CodingKey { case type = 1, userID = 2, revokedSessionIDs = 3 }
}

extension IdentityAPI {
    /// Verifies and acts on one of Apple's server-to-server notifications: `consent-revoked` and
    /// `account-delete` unlink the Apple identity (unless it is the user's only way to sign in)
    /// and revoke the user's sessions; the email ones are recorded. Errors:
    /// `invalid_provider_token` (a notification that does not verify), `provider_unavailable`,
    /// `unknown_provider` (Sign in with Apple is not configured).
    public static let appleNotification = RPCMethod<AppleNotificationRequest, AppleNotificationResponse>(
        name: "identity.appleNotification", callers: [.gateway])
    /// Signs in, signs up, links or migrates with a provider's ID token (the five cases).
    /// Errors: `unknown_provider`, `invalid_provider_token`, `provider_unavailable`,
    /// `migration_required`, `credential_already_in_use`, `provider_already_linked`,
    /// `requires_recent_login`, `email_exists`, `user_disabled`, `invalid_argument`.
    public static let signInWithProvider = RPCMethod<ProviderSignInRequest, AuthResponse>(
        name: "identity.signInWithProvider", callers: [.gateway])
    /// Removes a provider identity from the caller (recent login required). Errors:
    /// `provider_not_linked`, `last_sign_in_method`, `requires_recent_login`.
    public static let unlinkProvider = RPCMethod<UnlinkProviderRequest, User>(name: "identity.unlinkProvider", callers: [.gateway])
    /// Re-authenticates the caller with a provider token and replaces its session. Errors:
    /// `invalid_provider_token`, `user_mismatch`, `provider_unavailable`, `unknown_provider`.
    public static let reauthenticateWithProvider = RPCMethod<ProviderReauthenticateRequest, AuthResponse>(
        name: "identity.reauthenticateWithProvider", callers: [.gateway])
}
