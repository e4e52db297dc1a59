import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// How the operations reach the server: unauthenticated and authenticated calls, sign-ins that
// carry an anonymous user, and the answers adopted as the session.
extension GatehouseClient {
    // MARK: Calls

    /// An unauthenticated call; the answer when its status is one of `expect`.
    func call(
        _ method: String, _ path: String, query: [URLQueryItem] = [], body: [String: Any]? = nil, bearer: String? = nil, expect: Set<Int>
    ) async throws -> Transport.Answer {
        let answer = try await transport.send(transport.request(method, path, query: query, body: body, bearer: bearer))
        guard expect.contains(answer.status) else { throw Transport.error(of: answer) }
        return answer
    }

    /// A call with the session's access token. An access token the server finds expired (the
    /// device's clock is behind) is refreshed once and the call sent again; a session the server
    /// ended signs the device out (`sessionEnded`).
    func authenticated(
        _ method: String, _ path: String, query: [URLQueryItem] = [], body: [String: Any]? = nil, expect: Set<Int>
    ) async throws -> Transport.Answer {
        var (token, generation) = try await keeper.credentials()
        var retried = false
        while true {
            let answer = try await transport.send(transport.request(method, path, query: query, body: body, bearer: token))
            if expect.contains(answer.status) { return answer }
            let error = Transport.error(of: answer)
            if case .sessionEnded(let code) = error {
                if code == "token_expired" || code == "invalid_token", !retried {
                    retried = true
                    let fresh = try await keeper.credentials(force: token)
                    // Never sent again under another session than the one it began with.
                    guard fresh.generation == generation else { throw error }
                    (token, generation) = fresh
                    continue
                }
                await keeper.end(ifGeneration: generation, because: error)
            }
            throw error
        }
    }

    /// A sign-in at `path`: with the anonymous user's access token when the device holds one
    /// (so the server can migrate it). An anonymous session the server no longer knows (swept,
    /// revoked) is forgotten and the sign-in sent again without it; a network failure fails the
    /// sign-in rather than leave the anonymous user behind unasked.
    func signingIn(_ path: String, body: [String: Any]) async throws -> SignInResult {
        var anonymous: (token: String, generation: Int)?
        if case .anonymous = await keeper.state {
            do { anonymous = try await keeper.credentials() } catch let error as GatehouseError where error.endsSession || error == .notSignedIn {
                anonymous = nil
            }
        }
        do {
            return try await adopting(call("POST", path, body: body, bearer: anonymous?.token, expect: [200]))
        } catch GatehouseError.sessionEnded where anonymous != nil {
            await keeper.end(ifGeneration: anonymous!.generation)
            return try await adopting(call("POST", path, body: body, expect: [200]))
        }
    }

    /// Adopts the `{user, session, migration}` of a sign-in answer.
    func adopting(_ answer: Transport.Answer) async throws -> SignInResult {
        let reply = try Transport.decode(UserAndSessionBody.self, answer)
        guard let session = reply.session else { throw GatehouseError.invalidResponse("a sign-in answer without a session") }
        _ = try await keeper.adopt(session, user: reply.user)
        return SignInResult(user: reply.user, migration: reply.migration)
    }

    /// Records the user of an answer that is one.
    func updatingUser(_ answer: Transport.Answer) async throws -> User {
        let user = try Transport.decode(User.self, answer)
        await keeper.update(user: user)
        return user
    }

    /// `GET /v1/me` if signed in, errors ignored: after a change made by a code.
    func refreshUserQuietly() async {
        guard await keeper.current != nil else { return }
        _ = try? await reloadUser()
    }

    static func body(of credential: ProviderCredential) -> [String: Any] {
        var body: [String: Any] = ["provider": credential.provider, "idToken": credential.idToken]
        if let nonce = credential.rawNonce { body["nonce"] = nonce }
        if let code = credential.authorizationCode { body["authorizationCode"] = code }
        if let displayName = credential.displayName { body["displayName"] = displayName }
        if let name = credential.fullName {
            var parts: [String: Any] = [:]
            if let given = name.givenName { parts["givenName"] = given }
            if let family = name.familyName { parts["familyName"] = family }
            body["fullName"] = parts
        }
        return body
    }

    static func pathComponent(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? text
    }
}
