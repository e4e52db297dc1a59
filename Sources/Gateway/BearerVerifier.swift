import Foundation
import JWTKit

/// Verifies `Authorization: Bearer <jwt>` headers locally: algorithm pinned to the key's
/// (ES256/EdDSA/RS256; `none` and HS* refused), signature against the token service's JWKS,
/// `iss` and `aud` exactly, `exp`/`nbf`/`iat` with a small leeway, and the session not revoked.
struct BearerVerifier: Sendable {
    let jwks: JWKSCache
    let revoked: RevocationList
    let issuer: String
    let audience: String
    let leeway: TimeInterval
    let clock: GatewayClock

    /// Largest token accepted, in bytes.
    static let maxTokenLength = 8 * 1024

    func verify(authorization: String?) async throws -> AccessTokenClaims {
        guard let authorization, let token = Self.bearerToken(authorization) else {
            throw GatewayError.missingToken
        }
        guard token.utf8.count <= Self.maxTokenLength else { throw GatewayError.invalidToken() }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = Base64URL.decode(parts[0]),
            let header = try? JSONSerialization.jsonObject(with: headerData) as? [String: Any],
            let alg = header["alg"] as? String, JWKSCache.allowedAlgorithms.contains(alg),
            let kid = header["kid"] as? String
        else {
            throw GatewayError.invalidToken()
        }
        guard let (keys, expectedAlg) = await jwks.key(for: kid), expectedAlg == alg else {
            throw GatewayError.invalidToken()
        }
        let claims: AccessTokenClaims
        do {
            claims = try await keys.verify(token, as: AccessTokenClaims.self)
        } catch {
            throw GatewayError.invalidToken()
        }
        let now = clock.now()
        guard claims.iss == issuer, claims.aud.contains(audience) else { throw GatewayError.invalidToken() }
        if now.timeIntervalSince(claims.exp) > leeway {
            throw GatewayError.invalidToken("token_expired", "The access token has expired.")
        }
        if claims.iat.timeIntervalSince(now) > leeway { throw GatewayError.invalidToken() }
        if let nbf = claims.nbf, nbf.timeIntervalSince(now) > leeway { throw GatewayError.invalidToken() }
        if revoked.contains(claims.sid, now: now) {
            throw GatewayError.invalidToken("session_revoked", "The session has been revoked.")
        }
        return claims
    }

    /// The token of a `Bearer` authorization (scheme case-insensitive), or nil.
    static func bearerToken(_ header: String) -> String? {
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        // Trimmed by hand: Foundation's `trimmingCharacters(in:)` bridges through NSString and
        // cost half of all bearer verification in a profile of `GET /v1/me`.
        func isSpace(_ c: Character) -> Bool { c == " " || c == "\t" }
        var token = parts[1].drop(while: isSpace)
        while let last = token.last, isSpace(last) { token = token.dropLast() }
        return token.isEmpty ? nil : String(token)
    }
}

enum Base64URL {
    static func decode(_ s: Substring) -> Data? {
        var b = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while b.count % 4 != 0 { b.append("=") }
        return Data(base64Encoded: b)
    }
}
