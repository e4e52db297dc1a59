import Foundation

// Wire messages of email verification (issue 19 §3; proto/identity.proto).

/// `identity.sendEmailVerification` request: mail a verification code to the signed-in
/// caller's current address.
public struct SendEmailVerificationRequest: Codable, Sendable, Hashable {
    /// The signed-in caller.
    public var caller: AuthenticatedCaller
    /// The mail's language (`en`, `ja`, ...), from the gateway's `Accept-Language`.
    public var locale: String
    /// The client asking, for the log.
    public var client: ClientInfo

    /// A verification mail for `caller`'s address, in `locale`.
    public init(caller: AuthenticatedCaller, locale: String = "en", client: ClientInfo = ClientInfo()) {
        self.caller = caller
        self.locale = locale
        self.client = client
    }

    enum CodingKeys: Int, CodingKey { case caller = 1, locale = 2, client = 3 }
}

/// `identity.sendEmailVerification` reply.
public struct SendEmailVerificationResponse: Codable, Sendable, Hashable {
    /// The address the mail went to.
    public var email: String
    /// Seconds the code works.
    public var expiresIn: Int64

    /// A reply naming the address mailed and the code's lifetime.
    public init(email: String, expiresIn: Int64) {
        self.email = email
        self.expiresIn = expiresIn
    }

    enum CodingKeys: Int, CodingKey { case email = 1, expiresIn = 2 }
}

/// `identity.requestEmailVerification` request: mail a verification code to `email` if an
/// account with that unverified address exists. The answer (`Empty`) is the same either way.
public struct EmailVerificationRequest: Codable, Sendable, Hashable {
    /// The address typed by the user; refused with `invalid_email` when malformed.
    public var email: String
    /// The mail's language.
    public var locale: String
    /// The client asking, for the log.
    public var client: ClientInfo

    /// A verification request for `email`, the mail in `locale`.
    public init(email: String, locale: String = "en", client: ClientInfo = ClientInfo()) {
        self.email = email
        self.locale = locale
        self.client = client
    }

    enum CodingKeys: Int, CodingKey { case email = 1, locale = 2, client = 3 }
}

/// `identity.confirmEmailVerification` / `confirmEmailChange` / `revertEmailChange` request:
/// a code from a mail.
public struct EmailCodeRequest: Codable, Sendable, Hashable {
    /// The code from the mail (base64url of 32 random bytes).
    public var code: String
    /// The mail's language for a follow-up mail (the notice to the old address after a confirmed
    /// email change); ignored otherwise.
    public var locale: String
    /// The client confirming, for the log.
    public var client: ClientInfo

    /// A confirmation of `code`.
    public init(code: String, locale: String = "en", client: ClientInfo = ClientInfo()) {
        self.code = code
        self.locale = locale
        self.client = client
    }

    enum CodingKeys: Int, CodingKey { case code = 1, locale = 2, client = 3 }
}

/// `identity.confirmEmailVerification` / `confirmEmailChange` / `revertEmailChange` reply.
public struct EmailCodeResponse: Codable, Sendable, Hashable {
    /// The user after the change.
    public var user: User
    /// The sessions the change revoked (committed in the token service before this reply; a
    /// revert revokes every session of the user), so the gateway refuses their access tokens.
    public var revokedSessionIDs: [String]

    /// A reply with the changed user and the revoked sessions.
    public init(user: User, revokedSessionIDs: [String] = []) {
        self.user = user
        self.revokedSessionIDs = revokedSessionIDs
    }

    enum CodingKeys: Int, CodingKey { case user = 1, revokedSessionIDs = 2 }
}

extension IdentityAPI {
    /// Mails a verification code to the caller's current address (older codes stop working).
    /// Errors: `email_already_verified`, `rate_limited` (per-user mail limits, with
    /// `retryAfter`), `invalid_argument` (anonymous caller), `user_not_found`.
    public static let sendEmailVerification = RPCMethod<SendEmailVerificationRequest, SendEmailVerificationResponse>(
        name: "identity.sendEmailVerification", callers: [.gateway])
    /// Answers at once; then, only for an enabled account with this unverified address (within
    /// the per-address limits), stores a code and queues its mail. Errors: `invalid_email`.
    public static let requestEmailVerification = RPCMethod<EmailVerificationRequest, Empty>(
        name: "identity.requestEmailVerification", callers: [.gateway])
    /// Marks the code's address verified, if it is still the user's address. Errors:
    /// `invalid_verification_code`, `user_disabled`.
    public static let confirmEmailVerification = RPCMethod<EmailCodeRequest, EmailCodeResponse>(
        name: "identity.confirmEmailVerification", callers: [.gateway])
}
