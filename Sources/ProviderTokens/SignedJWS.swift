import Foundation
import GatehouseSupport

/// A compact JWS read far enough to check its signature: the parts, the decoded header, the
/// payload's bytes. Shared by `IDTokenVerifier` and `AppleNotificationVerifier`, so both refuse
/// the same things in the same order (`malformed`, then `alg`, `kid`, the key and the signature).
struct SignedJWS {
    let token: String
    let header: IDTokenHeader
    let payload: [UInt8]
    let signature: [UInt8]
    /// The byte length of `header.payload` (the signing input) in `token`.
    let signingInputLength: Int

    /// Splits and decodes `token` (at most `maxBytes`): three base64url parts, a header and a
    /// payload that are JSON objects, no `crit` header. Throws `malformed`.
    static func parse(_ token: String, maxBytes: Int) throws(ProviderTokenError) -> SignedJWS {
        guard token.utf8.count <= maxBytes else { throw .invalidToken(.malformed) }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerBytes = Base64URL.decodeBytes(parts[0]),
            let payloadBytes = Base64URL.decodeBytes(parts[1]),
            let signature = Base64URL.decodeBytes(parts[2]),
            let header = try? JSONDecoder().decode(IDTokenHeader.self, from: Data(headerBytes))
        else { throw .invalidToken(.malformed) }
        // Header and payload must be JSON objects (a decodable array or string is not a JWS).
        guard headerBytes.first(where: { !isJSONSpace($0) }) == UInt8(ascii: "{"),
            payloadBytes.first(where: { !isJSONSpace($0) }) == UInt8(ascii: "{")
        else { throw .invalidToken(.malformed) }
        // RFC 7515 §4.1.11: extensions we do not understand must not be ignored.
        if header.crit != nil { throw .invalidToken(.malformed) }
        return SignedJWS(
            token: token, header: header, payload: payloadBytes, signature: signature,
            signingInputLength: parts[0].utf8.count + 1 + parts[1].utf8.count)
    }

    /// Checks `alg` (RS256 or ES256 only), `kid`, the provider's key with that `kid` (fetched or
    /// refetched through `cache`), that the key fits `alg`, and the signature.
    func verifySignature(keys cache: JWKSCache, now: Date) async throws(ProviderTokenError) {
        guard let alg = header.alg.flatMap(ProviderSignatureAlgorithm.init(rawValue:)) else {
            throw .invalidToken(.algorithmNotAllowed)
        }
        guard let kid = header.kid, !kid.isEmpty else { throw .invalidToken(.missingKeyID) }
        let key: ProviderKey
        if let cached = cache.cachedKey(for: kid, now: now) { key = cached } else { key = try await cache.key(for: kid, now: now) }
        guard key.fits(alg) else { throw .invalidToken(.keyAlgorithmMismatch) }
        let signingInput = Array(token.utf8.prefix(signingInputLength))
        guard key.verifies(signature, of: signingInput, algorithm: alg) else { throw .invalidToken(.badSignature) }
    }

    static func isJSONSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }
}
