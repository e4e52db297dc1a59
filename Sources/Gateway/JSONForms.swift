import Foundation
import GatehouseProtocol

extension UserView {
    /// The user's JSON form.
    var json: [UInt8] {
        var w = JSONObjectWriter()
        w.string("id", id)
        w.string("email", email)
        w.bool("emailVerified", emailVerified)
        w.string("displayName", displayName)
        w.string("photoURL", photoURL)
        w.bool("isAnonymous", isAnonymous)
        w.string("createdAt", createdAt.formatted(.iso8601))
        w.string("lastSignInAt", lastSignInAt?.formatted(.iso8601))
        let settings = settingsJSON.trimmingCharacters(in: .whitespacesAndNewlines)
        w.raw("settings", settings.isEmpty ? Array("{}".utf8) : Array(settings.utf8))
        return w.finish()
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
