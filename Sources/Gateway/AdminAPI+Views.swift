import Foundation
import GatehouseContracts
import GatehouseSupport
import Hummingbird

// The admin listener's JSON forms and its audit route (issue 22 §1, §3).
extension AdminUser {
    /// The admin view of a user (`AdminUser` in admin-openapi.json; see Views.swift for both
    /// views): `{id, email, emailVerified, displayName, photoURL, isAnonymous, disabled,
    /// providers, customClaims, createdAt, updatedAt, lastSignInAt, version}`, custom claims an
    /// object (`{}` for none), no settings.
    var adminView: [UInt8] {
        var w = JSONObjectWriter()
        w.userIdentity(user)
        w.bool("disabled", user.disabled)
        w.strings("providers", user.providers)
        w.raw("customClaims", customClaimsJSON.isEmpty ? Array("{}".utf8) : Array(customClaimsJSON.utf8))
        w.string("createdAt", ISO8601.format(user.createdAt))
        w.string("updatedAt", ISO8601.format(updatedAt))
        w.string("lastSignInAt", user.lastSignInAt.map(ISO8601.format))
        w.int("version", Int(user.version))
        return w.finish()
    }
}

extension SessionInfo {
    /// `{sessionId, createdAt, authTime, lastUsedAt, expiresAt, amr, userAgent, ip, revokedAt, revokeReason}`.
    var adminJSON: [UInt8] {
        var w = JSONObjectWriter()
        w.string("sessionId", sessionID)
        w.string("createdAt", ISO8601.format(createdAt))
        w.string("authTime", ISO8601.format(authTime))
        w.string("lastUsedAt", ISO8601.format(lastUsedAt))
        w.string("expiresAt", ISO8601.format(expiresAt))
        w.strings("amr", amr)
        w.string("userAgent", client.userAgent.isEmpty ? nil : client.userAgent)
        w.string("ip", client.ip.isEmpty ? nil : client.ip)
        w.string("revokedAt", revokedAt.map(ISO8601.format))
        w.string("revokeReason", revokeReason.isEmpty ? nil : revokeReason)
        return w.finish()
    }
}

extension AuditEvent {
    /// `{source, seq, occurredAt (milliseconds), kind, actor, userId, reason, email, ip,
    /// userAgent, sessionId, detail}`, unset ones `null` (`detail` an object).
    func adminJSON(source: String) -> [UInt8] {
        var w = JSONObjectWriter()
        w.string("source", source)
        w.int("seq", Int(clamping: seq))
        w.string("occurredAt", AdminRoutes.preciseTime(occurredAt))
        w.string("kind", kind)
        w.string("actor", actor)
        for (name, value) in [("userId", userID), ("reason", reason), ("email", email), ("ip", ip), ("userAgent", userAgent), ("sessionId", sessionID)] {
            w.string(name, value.isEmpty ? nil : value)
        }
        w.raw("detail", detailJSON.isEmpty ? Array("{}".utf8) : Array(detailJSON.utf8))
        return w.finish()
    }
}

extension JSONObjectWriter {
    /// A member holding the array of the JSON values `elements`.
    mutating func rawArray(_ name: String, _ elements: [[UInt8]]) {
        var array: [UInt8] = [UInt8(ascii: "[")]
        for (n, element) in elements.enumerated() {
            if n > 0 { array.append(UInt8(ascii: ",")) }
            array += element
        }
        array.append(UInt8(ascii: "]"))
        raw(name, array)
    }
}

extension AdminRoutes {
    /// `GET /admin/v1/audit?userId&since&limit&cursor` (audit): both services' events merged by
    /// time, oldest first, at most `limit` (1 … 1,000; 100); `nextCursor` continues after the last
    /// one (also when `more` is false: new events come under it later).
    @Sendable func listAudit(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        _ = try await authorize(request, AdminKey.Scope.audit)
        let query = request.uri.queryParameters
        let userID = query.get("userId") ?? ""
        guard userID.utf8.count <= 128 else { throw GatewayError.invalidArgument("`userId` must be at most 128 bytes.") }
        let since = try Self.date(query.get("since"), "since")
        var limit: Int32 = 100
        if let text = query.get("limit") {
            guard let value = Int32(text), (1...maxAuditPage).contains(value) else {
                throw GatewayError.invalidArgument("`limit` must be a whole number from 1 to \(maxAuditPage).")
            }
            limit = value
        }
        var (identityAfter, tokenAfter): (UInt64, UInt64) = (0, 0)
        if let cursor = query.get("cursor") {
            let parts = cursor.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 2, let i = UInt64(parts[0]), let t = UInt64(parts[1]) else {
                throw GatewayError.invalidArgument("`cursor` must be the nextCursor of an earlier page.")
            }
            (identityAfter, tokenAfter) = (i, t)
        }
        let identityRequest = ListAuditRequest(afterSeq: identityAfter, userID: userID, limit: limit, since: since)
        let tokenRequest = ListAuditRequest(afterSeq: tokenAfter, userID: userID, limit: limit, since: since)
        async let identityPage = call(identity, IdentityAPI.listAudit, identityRequest)
        async let tokenPage = call(tokens, TokenAPI.listAudit, tokenRequest)
        var fromIdentity = try await identityPage.events[...]
        var fromToken = try await tokenPage.events[...]
        let more = fromIdentity.count == Int(limit) || fromToken.count == Int(limit)
        var events: [[UInt8]] = []
        while events.count < Int(limit), !(fromIdentity.isEmpty && fromToken.isEmpty) {
            if let next = fromIdentity.first, fromToken.first.map({ next.occurredAt <= $0.occurredAt }) ?? true {
                events.append(next.adminJSON(source: "identity"))
                identityAfter = next.seq
                fromIdentity.removeFirst()
            } else if let next = fromToken.first {
                events.append(next.adminJSON(source: "token"))
                tokenAfter = next.seq
                fromToken.removeFirst()
            }
        }
        let left = !fromIdentity.isEmpty || !fromToken.isEmpty
        var w = JSONObjectWriter()
        w.rawArray("events", events)
        w.string("nextCursor", "\(identityAfter).\(tokenAfter)")
        w.bool("more", more || left)
        return Self.json(.ok, w.finish())
    }

    /// RFC 3339 in UTC with milliseconds.
    static func preciseTime(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }
}
