import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import Logging
import ProviderTokens
import RPCRouting

// Sign in with Apple's server side (issue 20 §4): the authorization code exchanged at sign-in,
// and Apple's server-to-server notifications. Revocation on deletion is queued by the store's
// triggers and worked by `AppleRevocationWorker`.

/// Sign in with Apple's notifications: a consent revoked or an account deleted unlinks Apple
/// and ends the user's sessions.
public struct AppleNotificationHandlers: IdentityFeature {
    let basics: HandlerBasics
    let store: any UserStore & ProviderLinkStore
    /// Verifies the notifications (Sign in with Apple configured), or nil.
    let verifier: AppleNotificationVerifier?

    /// Registers `identity.appleNotification`.
    func register(_ router: inout RPCRouter) {
        router.register(IdentityAPI.appleNotification) { request, _ in try await appleNotification(request) }
    }

    /// Verifies one of Apple's server-to-server notifications and acts on it.
    public func appleNotification(_ request: AppleNotificationRequest) async throws -> AppleNotificationResponse {
        guard let verifier else { throw IdentityError.unknownProvider("apple.com") }
        let note: AppleNotification
        do {
            note = try await verifier.verify(body: request.body, now: clock.now)
        } catch {
            switch error {
            case .providerUnavailable: throw IdentityError.providerUnavailable(provider: "apple.com")
            // A type this version does not know: acknowledged (Apple would retry it forever), not acted on.
            case .unknownEventType(let type):
                logger.notice("apple notification of an unknown type \(type) ignored")
                return AppleNotificationResponse(type: type)
            default: throw IdentityError.invalidProviderToken(reason: error.reason?.rawValue ?? error.code, message: error.message)
            }
        }
        do {
            return try await act(on: note)
        } catch {
            // Not acted on: Apple's retry of the same notification must be accepted.
            verifier.replayGuard.forget(note.replayID)
            throw error
        }
    }

    /// What a verified notification does (see `appleNotification`).
    private func act(on note: AppleNotification) async throws -> AppleNotificationResponse {
        guard let owner = try await store.userID(provider: "apple.com", subject: note.sub) else {
            return AppleNotificationResponse(type: note.type.rawValue)
        }
        let kind = "apple.\(note.type.rawValue)"
        return try await audited(kind, actor: AuditEvent.Actor.system, userID: owner.rawValue) {
            switch note.type {
            case .emailDisabled, .emailEnabled:
                return AppleNotificationResponse(type: note.type.rawValue, userID: owner.rawValue)
            case .consentRevoked, .accountDelete:
                // The Apple identity can no longer sign in: unlink it (its token is queued for
                // revocation by the store) unless it is the user's only way in, and end every
                // session, before and after the unlink (a sign-in racing it is caught by the second
                // revocation or by its own check that the identity is still linked).
                let (_, revoked) = try await revokingSessions(of: owner, reason: "provider_revoked") {
                    do {
                        let user = try await store.unlink(provider: "apple.com", from: owner, now: clock.now)
                        await publish(IdentityAPI.Topic.userUpdated, user)
                    } catch IdentityError.lastSignInMethod {
                        logger.notice("apple \(note.type.rawValue) for user \(owner.rawValue): Apple is its only way to sign in; the link stays, its sessions end")
                    } catch IdentityError.providerNotLinked {}
                }
                return AppleNotificationResponse(type: note.type.rawValue, userID: owner.rawValue, revokedSessionIDs: revoked)
            }
        }
    }
}

/// What a provider sign-in checks and keeps besides the user: that the identity still names the
/// user once the session exists, and Sign in with Apple's refresh token (exchanged from the
/// authorization code, kept sealed).
struct ProviderLinks: IdentityFeature {
    let basics: HandlerBasics
    let store: any UserStore & AppleTokenStore
    /// Sign in with Apple's server side (the team key configured), or nil.
    let apple: AppleServerSide?

    /// Exchanges Sign in with Apple's authorization code for Apple's refresh token, as the
    /// client id the verified ID token was issued to (nil without the team key configured: the
    /// code is then ignored). A code Apple refuses is
    /// `invalid_provider_token` (`invalid_authorization_code`); Apple unreachable is
    /// `provider_unavailable`: the sign-in then changes nothing, and the app tries again.
    func exchangeAppleCode(
        _ code: String, redirectURI: String = "", token: VerifiedProviderToken, provider: String
    ) async throws -> (refreshToken: String, clientID: String)? {
        guard provider == "apple.com" else {
            throw IdentityError.invalidArgument(field: "authorizationCode", reason: "only Sign in with Apple sends an authorization code")
        }
        guard code.utf8.count <= 1024 else {
            throw IdentityError.invalidArgument(field: "authorizationCode", reason: "longer than 1024 bytes")
        }
        guard redirectURI.isEmpty || (redirectURI.utf8.count <= 2048 && redirectURI.hasPrefix("https://")) else {
            throw IdentityError.invalidArgument(field: "redirectURI", reason: "must be the https redirect_uri of the web authorization request, at most 2048 bytes")
        }
        // Without Apple's team key the code is not used (an app may send it to any server).
        guard let apple else { return nil }
        guard let clientID = token.aud.first(where: apple.client.clientSecret.clientIDs.contains) else {
            throw IdentityError.invalidProviderToken(reason: "wrong_audience", message: InvalidProviderTokenReason.wrongAudience.message)
        }
        let answer: AppleTokenResponse
        do {
            answer = try await apple.client.exchange(code: code, clientID: clientID, redirectURI: redirectURI.isEmpty ? nil : redirectURI)
        } catch .invalidGrant {
            throw IdentityError.invalidProviderToken(
                reason: "invalid_authorization_code",
                message: "Apple refused the authorization code (expired, already used, or for another client): sign in with Apple again")
        } catch {
            logger.warning("apple: the authorization code could not be exchanged: \(error)")
            throw IdentityError.providerUnavailable(provider: provider)
        }
        // Apple's answer names the user it is for: it must be the ID token's.
        guard Self.unverifiedSubject(answer.idToken) == token.sub else {
            throw IdentityError.invalidProviderToken(
                reason: "invalid_authorization_code", message: "the authorization code is for another Apple account than the ID token")
        }
        guard let refresh = answer.refreshToken, !refresh.isEmpty else { return nil }
        return (refresh, clientID)
    }

    /// Keeps Apple's refresh token for the user's identity, sealed. A failure is logged: the
    /// sign-in stands (the token then cannot be revoked at deletion; the log says so).
    func keepAppleToken(_ token: (refreshToken: String, clientID: String), user: UserID, subject: String) async {
        guard let apple else { return }
        do {
            let sealed = try apple.seal(token.refreshToken, associatedData: PendingAppleRevocation.associatedData(user: user, subject: subject))
            if try await !store.storeAppleToken(user: user, subject: subject, clientID: token.clientID, sealed: sealed, at: clock.now) {
                // The identity went meanwhile: the token is dropped, not revoked (revoking would
                // end the Apple account's authorisation for whoever holds the identity now).
                logger.notice("apple: the identity of user \(user.rawValue) went during its sign-in; Apple's token dropped")
            }
        } catch {
            logger.error("apple: the refresh token of user \(user.rawValue) could not be kept; it will not be revoked at deletion: \(error)")
        }
    }

    /// Revokes the session just issued (committed) when the identity it was issued on no longer
    /// names `user`: an unlink (a user's, or Apple's consent-revoked) that raced the sign-in, whose
    /// own revocation ran before this session existed.
    func confirmLinked(_ tokens: SessionTokens, user: UserID, provider: String, subject: String) async throws {
        guard try await store.userID(provider: provider, subject: subject) != user else { return }
        _ = try await self.tokens.call(TokenAPI.revokeSession, RevokeSessionRequest(sessionID: tokens.sessionID, reason: "credentials_changed"))
        throw IdentityError.invalidProviderToken(
            reason: "identity_unlinked", message: "this sign-in was unlinked from the account meanwhile: sign in again")
    }

    /// The `sub` of a JWT's payload, unverified (Apple's own answer over its token endpoint).
    static func unverifiedSubject(_ jwt: String) -> String? {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = Base64URL.decode(String(parts[1])),
            let object = try? JSONSerialization.jsonObject(with: payload) as? [String: Any]
        else { return nil }
        return object["sub"] as? String
    }
}
