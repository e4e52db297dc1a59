import Foundation
import GatehouseContracts
import GatehouseSupport

// The JSON forms of the contract's messages, each written in this one place. Field names are the
// HTTP API's (camelCase; see openapi.json); absent values are `null`.

// A user has two JSON views, one per audience, each written by one function:
// - `User.publicView`: the user as the user (and their apps) sees it: the HTTP API's answers
//   (`GET`/`PATCH /v1/me`, sign-up, sign-in, providers, email change) and the event stream
//   (`GET /v1/me/events`). It carries the settings document, never custom claims or admin state.
// - `AdminUser.adminView` (AdminAPI+Views.swift): the user as an operator sees it on the admin
//   listener: the same identity members, then `disabled`, custom claims, `updatedAt` and
//   `version`, and no settings.
// The members both start with are written by `JSONObjectWriter.userIdentity`. (The export file
// of `gatehouse users export` is neither: it is the import format, `UserJSONL.line` (UserTransfer).)

extension JSONObjectWriter {
    /// The members both views of a user start with: `id, email, emailVerified, displayName,
    /// photoURL, isAnonymous`; `null` for an unset email (anonymous), display name or photo URL.
    mutating func userIdentity(_ user: User) {
        string("id", user.id)
        string("email", user.email.isEmpty ? nil : user.email)  // null for an anonymous user
        bool("emailVerified", user.emailVerified)
        string("displayName", user.displayName.isEmpty ? nil : user.displayName)
        string("photoURL", user.photoURL.isEmpty ? nil : user.photoURL)
        bool("isAnonymous", user.isAnonymous)
    }
}

extension User {
    /// The public view of a user (`User` in openapi.json): `{id, email, emailVerified,
    /// displayName, photoURL, isAnonymous, providers, createdAt, lastSignInAt, settings}`: dates
    /// as ISO-8601 strings, `null` for an unset email (anonymous), display name, photo URL or
    /// last sign-in, settings written byte for byte (`{}` when empty).
    var publicView: [UInt8] {
        var w = JSONObjectWriter()
        w.userIdentity(self)
        w.strings("providers", providers)
        w.string("createdAt", ISO8601.format(createdAt))
        w.string("lastSignInAt", lastSignInAt.map(ISO8601.format))
        let settings = Self.trimmedJSON(settingsJSON)
        w.raw("settings", settings.isEmpty ? Array("{}".utf8) : settings)
        return w.finish()
    }

    /// The settings' bytes without leading or trailing JSON whitespace.
    static func trimmedJSON(_ text: String) -> [UInt8] {
        let bytes = Array(text.utf8)
        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) }) else { return [] }
        return Array(bytes[first...last])
    }
}

extension SessionTokens {
    /// The `session` JSON form: `{accessToken, refreshToken, tokenType, expiresIn}`.
    var json: [UInt8] {
        var w = JSONObjectWriter()
        w.string("accessToken", accessToken)
        w.string("refreshToken", refreshToken)
        w.string("tokenType", "Bearer")
        w.int("expiresIn", Int(expiresIn))
        return w.finish()
    }
}

extension AuthResponse {
    /// `{user, session}`: the answer to a sign-up or sign-in; `{user, session, migration}` when
    /// the sign-in migrated an anonymous user; `{user, verificationRequired: true}` (no session)
    /// for a sign-up that must verify its address first.
    var json: [UInt8] {
        var w = JSONObjectWriter()
        w.raw("user", user.publicView)
        guard hasSession else {
            w.bool("verificationRequired", true)
            return w.finish()
        }
        w.raw("session", tokens.json)
        if let migration { w.raw("migration", migration.json) }
        return w.finish()
    }
}

extension PasswordStrengthResponse {
    /// `{score, level, feedback}`: the score 0…4, its level (`weak`, `medium`, `strong`) and
    /// the reasons' messages, for a strength meter.
    var json: [UInt8] {
        var w = JSONObjectWriter()
        w.int("score", Int(score))
        w.string("level", level)
        w.strings("feedback", reasons.map(\.message))
        return w.finish()
    }
}
