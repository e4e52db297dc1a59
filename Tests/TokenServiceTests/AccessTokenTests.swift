import Crypto
import Foundation
import TokenPorts
import GatehouseContracts
import GatehouseTestSupport
import Synchronization
import Testing
import TokenCore
@testable import TokenService
import GatehouseSupport

/// Builds a token by hand from JSON parts.
func forge(header: String, payload: String, signature: Data = Data([1, 2, 3])) -> String {
    Base64URL.encode(Data(header.utf8)) + "." + Base64URL.encode(Data(payload.utf8)) + "." + Base64URL.encode(signature)
}

func payloadJSON(_ h: Harness, exp: Int64? = nil, iss: String = "https://auth.test", aud: String = "app") -> String {
    let now = Int64(h.clock.now.timeIntervalSince1970)
    return #"{"iss":"\#(iss)","aud":"\#(aud)","sub":"user-1","iat":\#(now),"exp":\#(exp ?? now + 900),"jti":"j","sid":"s","auth_time":\#(now),"amr":["pwd"]}"#
}

@Suite("Access tokens")
struct AccessTokenTests {
    @Test("tokens carry the documented claims and verify", arguments: TokenStoreKind.allCases, SigningAlgorithm.allCases)
    func claims(kind: TokenStoreKind, algorithm: SigningAlgorithm) async throws {
        let h = try await Harness.make(kind, algorithm: algorithm)
        h.identity.claims.withLock { $0["user-1"] = UserClaims(email: "a@example.com") }
        let tokens = try await h.service.issueSession(IssueSessionRequest(
            userID: "user-1", claims: UserClaims(email: "a@example.com", emailVerified: true, customClaimsJSON: #"{"role":"admin","tier":2}"#),
            amr: ["pwd"], authTime: h.clock.now, client: ClientInfo()))
        let parts = tokens.accessToken.split(separator: ".")
        let header = try JSONSerialization.jsonObject(with: Base64URL.decode(parts[0])!) as! [String: Any]
        #expect(header["alg"] as? String == algorithm.rawValue)
        #expect(header["kid"] as? String == h.service.keys.activeKid)
        #expect(header["typ"] as? String == "JWT")
        let verified = try await h.service.verifyAccessToken(VerifyRequest(token: tokens.accessToken))
        #expect(verified.subject == "user-1" && verified.sessionID == tokens.sessionID && verified.amr == ["pwd"])
        #expect(verified.email == "a@example.com" && verified.emailVerified && !verified.isAnonymous)
        #expect(verified.expiresAt.timeIntervalSince(verified.issuedAt) == 900)
        #expect(verified.customClaimsJSON.contains("\"role\":\"admin\""))
        #expect(tokens.expiresIn == 900)
    }

    @Test("kid is the RFC 7638 thumbprint (the RFC's own example key)")
    func thumbprint() {
        let jwk = [
            "kty": "RSA", "e": "AQAB",
            "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
        ]
        #expect(SigningKey.thumbprint(jwk) == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs")
    }

    @Test("the attack set is refused", arguments: TokenStoreKind.allCases)
    func attacks(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        let good = try await h.issue().accessToken
        let kid = h.service.keys.activeKid
        let parts = good.split(separator: ".").map(String.init)
        let p = payloadJSON(h)
        var attacks: [(String, String)] = []
        for none in ["none", "None", "NONE", "nOnE"] {
            attacks.append(("alg \(none)", forge(header: #"{"alg":"\#(none)","kid":"\#(kid)","typ":"JWT"}"#, payload: p, signature: Data())))
            attacks.append(("alg \(none) no sig", Base64URL.encode(Data(#"{"alg":"\#(none)"}"#.utf8)) + "." + Base64URL.encode(Data(p.utf8)) + "."))
        }
        // HS256 signed with the public key (JWK JSON and the PEM) as the HMAC secret.
        let jwks = h.service.keys.jwksJSON(at: h.clock.now)
        for secret in [Data(jwks.utf8), Data(h.service.keys.published(at: h.clock.now)[0].publicJWK["x"]!.utf8)] {
            let header = #"{"alg":"HS256","kid":"\#(kid)","typ":"JWT"}"#
            let signingInput = Base64URL.encode(Data(header.utf8)) + "." + Base64URL.encode(Data(p.utf8))
            let mac = Data(HMAC<SHA256>.authenticationCode(for: Data(signingInput.utf8), using: SymmetricKey(data: secret)))
            attacks.append(("HS256 with public key", signingInput + "." + Base64URL.encode(mac)))
        }
        attacks.append(("unknown kid", forge(header: #"{"alg":"ES256","kid":"nope","typ":"JWT"}"#, payload: p)))
        attacks.append(("kid path", forge(header: #"{"alg":"ES256","kid":"../../etc/passwd","typ":"JWT"}"#, payload: p)))
        attacks.append(("kid sql", forge(header: #"{"alg":"ES256","kid":"' OR '1'='1","typ":"JWT"}"#, payload: p)))
        attacks.append(("no kid", forge(header: #"{"alg":"ES256","typ":"JWT"}"#, payload: p)))
        attacks.append(("tampered payload", parts[0] + "." + Base64URL.encode(Data(payloadJSON(h, aud: "app").replacingOccurrences(of: "user-1", with: "admin").utf8)) + "." + parts[2]))
        attacks.append(("truncated", String(good.dropLast(10))))
        attacks.append(("two parts", parts[0] + "." + parts[1]))
        attacks.append(("oversized", good + String(repeating: "A", count: 9000)))
        attacks.append(("non-JSON header", Base64URL.encode(Data("not json".utf8)) + "." + parts[1] + "." + parts[2]))
        attacks.append(("garbage", "a.b.c"))
        attacks.append(("crit header", forge(header: #"{"alg":"ES256","kid":"\#(kid)","typ":"JWT","crit":["exp"]}"#, payload: p)))
        attacks.append(("empty", ""))
        attacks.append(("wrong alg for kid", forge(header: #"{"alg":"RS256","kid":"\#(kid)","typ":"JWT"}"#, payload: p)))
        for (name, token) in attacks {
            let refused = await expectCode(.invalidToken) { try await h.service.verifyAccessToken(VerifyRequest(token: token, checkRevoked: false)) }
            #expect(refused, "\(name) was not refused")
        }
    }

    @Test("expired, not yet valid, wrong issuer and wrong audience are refused; leeway is bounded", arguments: TokenStoreKind.allCases)
    func timeAndIdentity(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        let token = try await h.issue().accessToken
        // The default leeway is 10 s (GATEHOUSE_ACCESS_TOKEN_LEEWAY, the gateway's too).
        #expect(h.service.configuration.leeway == 10)
        h.clock.advance(by: 900 + 9)
        _ = try await h.service.verifyAccessToken(VerifyRequest(token: token, checkRevoked: false))
        h.clock.advance(by: 2)
        #expect(await expectCode(.tokenExpired) { try await h.service.verifyAccessToken(VerifyRequest(token: token, checkRevoked: false)) })

        // Tokens minted by a service with another issuer/audience but the same keys are refused.
        let h2 = try await h.reopen()
        let other = TokenVerifier(keys: h2.service.keys, issuer: "https://elsewhere", audience: "app")
        let fresh = try await h2.issue().accessToken
        await #expect(throws: TokenError.self) { try await other.verify(fresh, now: h.clock.now) }
        let otherAud = TokenVerifier(keys: h2.service.keys, issuer: "https://auth.test", audience: "other")
        await #expect(throws: TokenError.self) { try await otherAud.verify(fresh, now: h.clock.now) }
        // Issued in the future (beyond leeway) = not yet valid.
        let early = ManualClock()
        early.advance(by: -3600)
        await #expect(throws: TokenError.self) { try await h2.service.verifier.verify(fresh, now: early.now) }
        #expect(TokenVerifier(keys: h2.service.keys, issuer: "", audience: "", leeway: 10_000).leeway == 120)
    }

    @Test("after key rotation the new key signs and old tokens verify until the old key retires", arguments: TokenStoreKind.allCases)
    func keyRotation(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        let oldKid = h.service.keys.activeKid
        let oldToken = try await h.issue().accessToken
        let rotated = try await h.service.rotateKeys()
        #expect(rotated.previousKid == oldKid && rotated.kid != oldKid)
        let newToken = try await h.issue().accessToken
        #expect(newToken.split(separator: ".")[0] != oldToken.split(separator: ".")[0])
        _ = try await h.service.verifyAccessToken(VerifyRequest(token: oldToken, checkRevoked: false))
        #expect(h.service.keys.jwksJSON(at: h.clock.now).contains(oldKid))
        // Once the old key's last token has expired, the key verifies nothing (even before a
        // reload) and is no longer published.
        h.clock.advance(by: 900 + 31)
        #expect(await expectCode(.invalidToken) { try await h.service.verifyAccessToken(VerifyRequest(token: oldToken, checkRevoked: false)) })
        try await h.service.loadKeys()
        #expect(!h.service.keys.jwksJSON(at: h.clock.now).contains(oldKid))
        #expect(await expectCode(.invalidToken) { try await h.service.verifyAccessToken(VerifyRequest(token: oldToken, checkRevoked: false)) })
    }

    @Test("private keys are encrypted at rest when a key-encryption key is configured", arguments: TokenStoreKind.allCases)
    func encryptionAtRest(_ kind: TokenStoreKind) async throws {
        let kek = [UInt8](repeating: 7, count: 32)
        let h = try await Harness.make(kind, encryptionKey: kek)
        let material = h.service.keys.published(at: h.clock.now)[0].privateMaterial
        switch kind {
        case .sqlite:
            let file = try Data(contentsOf: h.dir.appendingPathComponent("token.sqlite"))
            let wal = (try? Data(contentsOf: h.dir.appendingPathComponent("token.sqlite-wal"))) ?? Data()
            #expect(file.range(of: Data(material.utf8.prefix(60))) == nil)
            #expect(wal.range(of: Data(material.utf8.prefix(60))) == nil)
        case .postgres:
            // What the database holds: the key sealed, and the refresh secret sealed (60 bytes, not 32).
            let stored = try await h.service.store.keys()
            #expect(stored.count == 1 && stored.allSatisfy { $0.encrypted })
            #expect(stored.allSatisfy { $0.privateKey.range(of: Data(material.utf8.prefix(60))) == nil })
            let secret = try await h.service.store.secret(named: TokenSecrets.successorName) { Data() }
            #expect(secret.count == 60)
        }
        // Reopening with the same key works; without it, or with another, start-up fails clearly.
        _ = try await h.reopen(encryptionKey: kek)
        await #expect(throws: RPCError.self) { try await h.reopen() }
        await #expect(throws: RPCError.self) { try await h.reopen(encryptionKey: [UInt8](repeating: 8, count: 32)) }
    }

    @Test("PyJWT verifies our tokens with our JWKS, and refuses a tampered one", arguments: SigningAlgorithm.allCases)
    func pyjwt(algorithm: SigningAlgorithm) async throws {
        let h = try await Harness.make(algorithm: algorithm)
        let token = try await h.issue().accessToken
        let jwks = h.service.keys.jwksJSON(at: h.clock.now)
        let script = """
            import json, sys, jwt
            jwks = jwt.PyJWKSet.from_json(sys.argv[1])
            token = sys.argv[2]
            kid = jwt.get_unverified_header(token)["kid"]
            key = next(k for k in jwks.keys if k.key_id == kid)
            claims = jwt.decode(token, key.key, algorithms=[key.algorithm_name], audience="app", issuer="https://auth.test", options={"verify_exp": False, "verify_iat": False})
            print(claims["sub"])
            """
        let ok = try await pythonRun(["-c", script, jwks, token])
        #expect(ok.status == 0, "\(ok.error)")
        #expect(ok.output.trimmingCharacters(in: .whitespacesAndNewlines) == "user-1")
        let parts = token.split(separator: ".").map(String.init)
        let tampered = parts[0] + "." + Base64URL.encode(Data(payloadJSON(h).utf8)) + "." + parts[2]
        #expect(try await pythonRun(["-c", script, jwks, tampered]).status != 0)
    }
}

/// `python3 ARGUMENTS`, without blocking a cooperative thread.
func pythonRun(_ arguments: [String]) async throws -> (status: Int32, output: String, error: String) {
    let result = try await runProcess(URL(fileURLWithPath: "/usr/bin/env"), ["python3"] + arguments)
    return (result.status, result.stdout, result.stderr)
}
