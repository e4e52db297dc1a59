import Foundation

/// A session as the generator keeps it.
public struct SessionTokens: Sendable, Equatable {
    /// The access token, sent as the bearer of `GET /v1/me`.
    public var accessToken: String
    /// The refresh token; presented once, then replaced by its successor.
    public var refreshToken: String
    /// Access token lifetime in seconds, as the server said.
    public var expiresIn: Double = 0
}

/// A user created during setup.
public struct SetupUser: Sendable {
    /// The user's id from the sign-up or sign-in reply.
    public var id: String
    /// The email the user signed up with (sign-ins of the pool send it).
    public var email: String
    /// The session the user's sign-up or sign-in returned.
    public var session: SessionTokens
}

/// The checks applied to each response body. Each returns what was wrong, or the useful parts.
/// Status codes are checked by the caller; these only look at bodies of the expected status.
public enum ResponseChecks {
    /// What a check found: the useful parts of a good body, or what was wrong with a bad one.
    public enum Outcome<Value> {
        case ok(Value)
        case bad(String)
    }

    /// A user id as the server sends it: a string (or, leniently, an integer).
    static func id(_ value: JSONValue?) -> String? {
        switch value {
        case .string(let text)?: return text
        case .number(let number)? where number == number.rounded() && abs(number) < 1e15: return String(Int64(number))
        default: return nil
        }
    }

    static func checkSession(_ session: JSONValue?, presentedRefreshToken: String? = nil) -> Outcome<SessionTokens> {
        guard let session, case .object = session else { return .bad("session missing") }
        guard let access = session["accessToken"]?.string, !access.isEmpty else { return .bad("session.accessToken missing or empty") }
        guard let refresh = session["refreshToken"]?.string, !refresh.isEmpty else { return .bad("session.refreshToken missing or empty") }
        guard let type = session["tokenType"]?.string, type.utf8.count == 6, type.lowercased() == "bearer" else {
            return .bad("session.tokenType is not \"Bearer\"")
        }
        guard let expiresIn = session["expiresIn"]?.number, expiresIn > 0 else { return .bad("session.expiresIn missing or not positive") }
        if let presentedRefreshToken, refresh == presentedRefreshToken {
            return .bad("session.refreshToken was not rotated (same as the presented one)")
        }
        return .ok(SessionTokens(accessToken: access, refreshToken: refresh, expiresIn: expiresIn))
    }

    /// Body of `POST /v1/accounts` (201) and `POST /v1/sessions` (200): `{user, session}`.
    public static func checkAuth(_ body: [UInt8], email: String) -> Outcome<SetupUser> {
        guard let decoded = try? JSONValue.parse(body), case .object = decoded else { return .bad("not a JSON object {user, session}") }
        guard let user = decoded["user"], case .object = user else { return .bad("user missing") }
        guard let id = id(user["id"]), !id.isEmpty else { return .bad("user.id missing or empty") }
        guard let gotEmail = user["email"]?.string, gotEmail.lowercased() == email.lowercased() else {
            return .bad("user.email is not the email sent")
        }
        switch checkSession(decoded["session"]) {
        case .bad(let reason): return .bad(reason)
        case .ok(let session): return .ok(SetupUser(id: id, email: email, session: session))
        }
    }

    /// Body of `POST /v1/sessions/refresh` (200): `{session}` with a rotated refresh token.
    public static func checkRefresh(_ body: [UInt8], presented: String) -> Outcome<SessionTokens> {
        guard let decoded = try? JSONValue.parse(body), case .object = decoded else { return .bad("not a JSON object {session}") }
        return checkSession(decoded["session"], presentedRefreshToken: presented)
    }

    /// Body of `GET /v1/me` (200): a user whose `id` is the expected one (when known).
    public static func checkMe(_ body: [UInt8], expectedID: String?) -> Outcome<String> {
        guard let user = try? JSONValue.parse(body), case .object = user else { return .bad("not a JSON user object") }
        guard let id = id(user["id"]), !id.isEmpty else { return .bad("id missing or empty") }
        if let expectedID, id != expectedID { return .bad("id is not the token's user") }
        return .ok(id)
    }
}
