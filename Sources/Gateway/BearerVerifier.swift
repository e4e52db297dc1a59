import Foundation
import GatehouseContracts
import JWTKit
import GatehouseSupport

/// Verifies `Authorization: Bearer <jwt>` headers locally: algorithm pinned to the key's
/// (ES256/EdDSA/RS256; `none` and HS* refused), signature against the token service's JWKS,
/// `iss` and `aud` exactly, `exp`/`nbf`/`iat` with a small leeway, and the session not revoked
/// (`RevocationState`: while it is not loaded, requests wait for it and then answer 503).
struct BearerVerifier: Sendable {
    let jwks: JWKSCache
    let revocations: RevocationState
    let issuer: String
    let audience: String
    let leeway: TimeInterval
    let clock: WallClock
    /// How long a request waits for the revocation state to be loaded before it is refused.
    let revocationWait: Duration
    /// Asks the token service whether a token's session is revoked (`token.verifyAccessToken`
    /// with `checkRevoked`), for when the revocation list overflowed; throws when it is.
    var confirmNotRevoked: @Sendable (String) async throws -> Void = { _ in }

    /// Largest token accepted, in bytes.
    static let maxTokenLength = 8 * 1024

    func verify(authorization: String?) async throws -> AccessTokenClaims {
        guard let authorization, let token = Self.bearerToken(authorization) else {
            throw GatewayError.missingToken
        }
        guard token.utf8.count <= Self.maxTokenLength else { throw GatewayError.invalidToken() }
        // Split on the UTF-8 view: `String.split` walks grapheme clusters, a few µs for a JWT.
        let parts = token.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3, let (alg, kid) = Self.algorithmAndKeyID(Substring(parts[0])), JWKSCache.allowedAlgorithms.contains(alg) else {
            throw GatewayError.invalidToken()
        }
        // A fresh, known key without a hop to the cache's actor; anything else through it.
        let found: (JWTKeyCollection, String)?
        if let cached = jwks.cachedKey(for: kid) { found = cached } else { found = await jwks.key(for: kid) }
        guard let (keys, expectedAlg) = found, expectedAlg == alg else {
            throw GatewayError.invalidToken()
        }
        let claims: AccessTokenClaims
        do {
            claims = try await keys.verify(token, as: AccessTokenClaims.self)
        } catch {
            throw GatewayError.invalidToken()
        }
        let now = clock.now
        guard claims.iss == issuer, claims.aud.contains(audience) else { throw GatewayError.invalidToken() }
        if now.timeIntervalSince(claims.exp) > leeway {
            throw GatewayError.invalidToken(.tokenExpired, "The access token has expired.")
        }
        if claims.iat.timeIntervalSince(now) > leeway { throw GatewayError.invalidToken() }
        if let nbf = claims.nbf, nbf.timeIntervalSince(now) > leeway { throw GatewayError.invalidToken() }
        // Until the revocation state is loaded (at start, or after missed events) a revoked
        // token could pass: wait for it, and refuse with 503 rather than let one through.
        if !revocations.isCurrent, !(await revocations.waitUntilCurrent(timeout: revocationWait)) {
            throw GatewayError.serviceUnavailable
        }
        if revocations.list.contains(claims.sid, now: now) {
            throw GatewayError.invalidToken(.sessionRevoked, "The session has been revoked.")
        }
        // The list had to drop entries whose tokens are still valid: it cannot vouch for this one.
        if revocations.list.isOverflowed(now: now) { try await confirmNotRevoked(token) }
        return claims
    }

    /// `alg` and `kid` of a JWS header (base64url JSON). Headers of string members only (ours:
    /// `alg`, `typ`, `kid`) are read by `JSONReader.flatStrings`; any other shape by `JSONSerialization`.
    static func algorithmAndKeyID(_ encoded: Substring) -> (alg: String, kid: String)? {
        guard let bytes = Base64URL.decodeBytes(encoded) else { return nil }
        if let members = JSONReader.flatStrings(bytes) {
            guard let alg = members["alg"] ?? nil, let kid = members["kid"] ?? nil else { return nil }
            return (alg, kid)
        }
        guard let header = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
            let alg = header["alg"] as? String, let kid = header["kid"] as? String
        else { return nil }
        return (alg, kid)
    }

    /// The token of a `Bearer` authorization (scheme case-insensitive), or nil.
    static func bearerToken(_ header: String) -> String? {
        // Read on the UTF-8 view (Foundation's `trimmingCharacters(in:)` and Character-based
        // `split` were most of the cost of this function in profiles of `GET /v1/me`).
        let utf8 = header.utf8
        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 }
        guard let schemeStart = utf8.firstIndex(where: { $0 != 0x20 }),
            let schemeEnd = utf8[schemeStart...].firstIndex(of: 0x20),
            utf8.distance(from: schemeStart, to: schemeEnd) == 6,
            zip(utf8[schemeStart..<schemeEnd], "bearer".utf8).allSatisfy({ ($0 | 0x20) == $1 })
        else { return nil }
        guard let first = utf8[schemeEnd...].firstIndex(where: { !isSpace($0) }),
            let last = utf8[first...].lastIndex(where: { !isSpace($0) })
        else { return nil }
        return String(header[first...last])
    }
}
