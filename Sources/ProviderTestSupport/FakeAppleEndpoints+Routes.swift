import Crypto
import Foundation
import GatehouseSupport
import Hummingbird
import NIOCore
import Synchronization

/// The fake's `POST /auth/token` and `POST /auth/revoke`.
extension FakeAppleEndpoints {
    func addRoutes(to router: Router<BasicRequestContext>, hangs: Gate) {
        router.post("/auth/token") { request, _ -> Response in
            try await self.respond(to: request, counting: \.tokenRequests, mode: \.tokenMode, hangs: hangs) { form in self.exchange(form) }
        }
        router.post("/auth/revoke") { request, _ -> Response in
            try await self.respond(to: request, counting: \.revokeRequests, mode: \.revokeMode, hangs: hangs) { form in
                guard let token = form["token"], !token.isEmpty else { return Self.error("invalid_request") }
                self.state.withLock { state in
                    state.revocations.append(Revocation(token: token, tokenTypeHint: form["token_type_hint"], clientID: form["client_id"] ?? ""))
                }
                return Response(status: .ok)
            }
        }
    }

    /// What both endpoints do first: count the request, answer as the endpoint's mode says, read
    /// the form and check its client secret; then `body` answers the form.
    func respond(
        to request: Request, counting count: WritableKeyPath<State, Int>, mode: KeyPath<State, FakeOpenIDProvider.Mode>, hangs: Gate,
        _ body: ([String: String]) -> Response
    ) async throws -> Response {
        let mode = state.withLock { state in
            state[keyPath: count] += 1
            return state[keyPath: mode]
        }
        if let early = await Self.answer(mode, hangs: hangs) { return early }
        let form = try await Self.form(request)
        if let refusal = refuseSecret(form) { return refusal }
        return body(form)
    }

    /// 503 when down; waits for the fake to stop when hanging; nil when up.
    static func answer(_ mode: FakeOpenIDProvider.Mode, hangs: Gate) async -> Response? {
        switch mode {
        case .up: return nil
        case .down: return FakeOpenIDProvider.unavailable()
        case .hang, .hangInBody:
            await hangs.wait()
            return FakeOpenIDProvider.unavailable()
        }
    }

    /// Apple's error body `{"error": code}` with status 400.
    static func error(_ code: String) -> Response {
        FakeOpenIDProvider.json(["error": code], status: .badRequest)
    }

    /// The request's `application/x-www-form-urlencoded` fields (a repeated name: the last one).
    static func form(_ request: Request) async throws -> [String: String] {
        let buffer = try await request.body.collect(upTo: 64 * 1024)
        var fields: [String: String] = [:]
        for pair in String(buffer: buffer).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map {
                $0.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
            }
            fields[parts[0]] = parts.count == 2 ? parts[1] : ""
        }
        return fields
    }

    /// 400 `invalid_client` unless `client_secret` is a valid secret of a registered account for `client_id`.
    func refuseSecret(_ form: [String: String]) -> Response? {
        let (accounts, now) = state.withLock { ($0.accounts, $0.clock.now) }
        guard let reason = Self.secretProblem(form["client_secret"] ?? "", clientID: form["client_id"] ?? "", accounts: accounts, now: now)
        else { return nil }
        state.withLock { $0.refusedSecrets.append(reason) }
        return Self.error("invalid_client")
    }

    static func secretProblem(_ secret: String, clientID: String, accounts: [Account], now: Date) -> String? {
        let parts = secret.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = Base64URL.decode(parts[0]), let claimsData = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2]),
            let header = try? JSONSerialization.jsonObject(with: headerData) as? [String: Any],
            let claims = try? JSONSerialization.jsonObject(with: claimsData) as? [String: Any]
        else { return "the secret is not a compact JWS" }
        guard header["alg"] as? String == "ES256" else { return "alg is not ES256" }
        guard let account = accounts.first(where: { $0.keyID == header["kid"] as? String }) else { return "unknown kid" }
        guard let parsed = try? P256.Signing.ECDSASignature(rawRepresentation: signature),
            account.publicKey.isValidSignature(parsed, for: SHA256.hash(data: Data((parts[0] + "." + parts[1]).utf8)))
        else { return "bad signature" }
        guard claims["iss"] as? String == account.teamID else { return "iss is not the team id" }
        guard claims["aud"] as? String == "https://appleid.apple.com" else { return "aud is not https://appleid.apple.com" }
        guard let sub = claims["sub"] as? String, sub == clientID, account.clientIDs.contains(sub) else {
            return "sub is not the client_id, or not a client of the account"
        }
        guard let iat = number(claims["iat"]), let exp = number(claims["exp"]) else {
            return "iat or exp missing"
        }
        let seconds = now.timeIntervalSince1970
        guard iat <= seconds + 60 else { return "iat is in the future" }
        guard exp > seconds else { return "expired" }
        guard exp - iat <= 15_777_000 else { return "exp is more than 180 days after iat" }
        return nil
    }

    /// A JSON number as a Double.
    static func number(_ value: Any?) -> Double? {
        if let int = value as? Int { return Double(int) }
        return value as? Double
    }

    /// The token answer for a registered, unused code of the client, else `invalid_grant`.
    func exchange(_ form: [String: String]) -> Response {
        guard form["grant_type"] == "authorization_code" else { return Self.error("unsupported_grant_type") }
        let clientID = form["client_id"] ?? ""
        let found: (Grant, Date, String, TestSigningKey)? = state.withLock { state in
            guard let code = form["code"], var grant = state.grants[code], !grant.used, grant.clientID == clientID,
                grant.redirectURI == nil || grant.redirectURI == form["redirect_uri"]
            else { return nil }
            grant.used = true
            state.grants[code] = grant
            return (grant, state.clock.now, state.issuer, state.idTokenKey)
        }
        guard let found else { return Self.error("invalid_grant") }
        let (grant, now, issuer, key) = found
        var claims = (try? JSONSerialization.jsonObject(with: grant.claims) as? [String: Any]) ?? [:]
        let iat = Int(now.timeIntervalSince1970)
        for (name, value) in ["iss": issuer, "aud": clientID, "iat": iat, "exp": iat + 600, "jti": UUID().uuidString] as [String: Any]
        where claims[name] == nil {
            claims[name] = value
        }
        return FakeOpenIDProvider.json([
            "access_token": "a." + UUID().uuidString.lowercased(), "token_type": "bearer", "expires_in": 3600,
            "refresh_token": grant.refreshToken, "id_token": key.idToken(claims: claims),
        ])
    }
}
