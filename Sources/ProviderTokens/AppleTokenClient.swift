import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1

/// Sign in with Apple's server side (issue 20 §4): exchanges an authorization code for Apple's
/// tokens, and revokes a token (what Apple requires when an account is deleted), over
/// AsyncHTTPClient with the client secret of `AppleClientSecret`.
///
/// - Addresses are `https`; plain `http` only on a loopback host when `allowInsecureLoopback`
///   (test mode), as for provider keys.
/// - Each call has a deadline (`timeout`, covering connect, head and body): a hanging Apple
///   gives `provider_unavailable` by then.
/// - Apple's `{"error": "invalid_grant"}` is `AppleServerError.invalidGrant`; its other 4xx
///   errors are `.rejected`; network failures, 5xx and unreadable answers are `.unavailable`.
/// - Redirects are not followed by the default client (a redirect would resend the secret).
/// - No code, token or secret is logged or put in an error.
public struct AppleTokenClient: Sendable {
    /// Apple's token endpoint.
    public static let appleTokenURL = URL(string: "https://appleid.apple.com/auth/token")!
    /// Apple's revoke endpoint.
    public static let appleRevokeURL = URL(string: "https://appleid.apple.com/auth/revoke")!
    /// The process's HTTP client for Apple: never follows redirects, never shut down.
    public static let noRedirectHTTPClient = HTTPClient(
        eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: .init(redirectConfiguration: .disallow))

    /// Where codes are exchanged.
    public let tokenURL: URL
    /// Where tokens are revoked.
    public let revokeURL: URL
    /// The deadline of one call.
    public let timeout: Duration
    /// The client secrets.
    public let clientSecret: AppleClientSecret
    private let httpClient: HTTPClient
    private let logger: Logger
    /// Largest answer read.
    static let maxBodyBytes = 256 * 1024

    /// A client for Apple's endpoints (or a fake's, in test mode on loopback), signing its
    /// requests with `clientSecret`; `httpClient` should not follow redirects (its owner shuts it down).
    public init(
        clientSecret: AppleClientSecret, tokenURL: URL = AppleTokenClient.appleTokenURL,
        revokeURL: URL = AppleTokenClient.appleRevokeURL, httpClient: HTTPClient = AppleTokenClient.noRedirectHTTPClient,
        timeout: Duration = .seconds(10), allowInsecureLoopback: Bool = false,
        logger: Logger = Logger(label: "gatehouse.apple-token-client")
    ) throws(ProviderConfigurationError) {
        for url in [tokenURL, revokeURL] {
            try ProviderConfiguration.checkAddress(url, provider: "apple", allowInsecureLoopback: allowInsecureLoopback)
        }
        self.clientSecret = clientSecret
        self.tokenURL = tokenURL
        self.revokeURL = revokeURL
        self.httpClient = httpClient
        self.timeout = timeout
        self.logger = logger
    }

    /// Exchanges the authorization `code` the app received for Apple's tokens
    /// (`grant_type=authorization_code`), as `clientID` (the bundle id for a code from an app,
    /// the services id for one from the web); `redirectURI` must be the one of the authorization
    /// request when it had one (web). Verify the answer's `idToken` before using it.
    public func exchange(code: String, clientID: String, redirectURI: String? = nil) async throws(AppleServerError) -> AppleTokenResponse {
        var form = [("grant_type", "authorization_code"), ("code", code), ("client_id", clientID)]
        if let redirectURI { form.append(("redirect_uri", redirectURI)) }
        let body = try await post(tokenURL, form: form, clientID: clientID, endpoint: "token")
        guard let response = try? JSONDecoder().decode(AppleTokenResponse.self, from: body) else {
            let error = AppleServerError.unavailable(detail: "the token endpoint's answer is not a token response")
            log(error, endpoint: "token", status: 200)
            throw error
        }
        return response
    }

    /// Revokes `token` (by default a refresh token) issued to `clientID`; returns when Apple
    /// answered 200.
    public func revoke(token: String, tokenTypeHint: AppleTokenTypeHint = .refreshToken, clientID: String) async throws(AppleServerError) {
        let form = [("token", token), ("token_type_hint", tokenTypeHint.rawValue), ("client_id", clientID)]
        _ = try await post(revokeURL, form: form, clientID: clientID, endpoint: "revoke")
    }

    /// POSTs `form` plus `client_secret` to `url` under the deadline; the body of a 200 answer.
    private func post(_ url: URL, form: [(String, String)], clientID: String, endpoint: String) async throws(AppleServerError) -> Data {
        let secret: String
        do throws(ProviderConfigurationError) {
            secret = try clientSecret.secret(for: clientID)
        } catch {
            throw .unknownClient(clientID)
        }
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "Accept", value: "application/json")
        request.body = .bytes(ByteBuffer(string: Self.formEncode(form + [("client_secret", secret)])))
        let timeout = self.timeout
        let outcome = FirstOutcome<Result<(UInt, Data), AppleServerError>>()
        let call = Task { [httpClient, logger] in
            outcome.offer(await Self.attempt(request, url: url, client: httpClient, timeout: timeout, logger: logger))
        }
        let timer = Task {
            try? await Task.sleep(for: timeout)
            outcome.offer(.failure(.unavailable(detail: "no answer from \(url.host ?? "Apple") within \(ProviderDocumentFetcher.describe(timeout))")))
        }
        let result = await outcome.value
        call.cancel()
        timer.cancel()
        switch result {
        case .success(let (status, body)):
            do throws(AppleServerError) {
                try Self.check(status: status, body: body)
            } catch {
                log(error, endpoint: endpoint, status: status)
                throw error
            }
            return body
        case .failure(let error):
            log(error, endpoint: endpoint, status: nil)
            throw error
        }
    }

    private static func attempt(
        _ request: HTTPClientRequest, url: URL, client: HTTPClient, timeout: Duration, logger: Logger
    ) async -> Result<(UInt, Data), AppleServerError> {
        do {
            // The client's own deadline is only a backstop: the timer in `post` answers first.
            let response = try await client.execute(
                request, deadline: .now() + ProviderDocumentFetcher.timeAmount(timeout) + .seconds(1), logger: logger)
            let body = try await response.body.collect(upTo: maxBodyBytes)
            return .success((response.status.code, Data(body.readableBytesView)))
        } catch is NIOTooManyBytesError {
            return .failure(.unavailable(detail: "\(url.host ?? "Apple") sent more than \(maxBodyBytes) bytes"))
        } catch {
            return .failure(.unavailable(detail: "\(url.host ?? "Apple") could not be reached: \(ProviderDocumentFetcher.describe(error))"))
        }
    }

    /// 200 passes; a 4xx with Apple's `error` is `invalidGrant` or `rejected`; anything else is `unavailable`.
    static func check(status: UInt, body: Data) throws(AppleServerError) {
        if status == 200 { return }
        guard (400..<500).contains(status) else { throw .unavailable(detail: "Apple answered HTTP \(status)") }
        let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any]
        let error = (object?["error"] as? String).map(sanitized) ?? "no_error_code"
        if error == "invalid_grant" { throw .invalidGrant }
        throw .rejected(error: error, status: Int(status))
    }

    /// Apple's error code if it looks like one (lowercase letters and `_`, short), else a placeholder.
    static func sanitized(_ code: String) -> String {
        code.count <= 40 && !code.isEmpty && code.allSatisfy({ $0 == "_" || ("a"..."z").contains($0) }) ? code : "unrecognized_error"
    }

    /// `application/x-www-form-urlencoded`: every byte but the unreserved ones percent-encoded.
    static func formEncode(_ fields: [(String, String)]) -> String {
        var allowed = CharacterSet.alphanumerics.intersection(CharacterSet(charactersIn: Unicode.Scalar(0)..<Unicode.Scalar(128)))
        allowed.insert(charactersIn: "-._~")
        return fields.map { name, value in
            name.addingPercentEncoding(withAllowedCharacters: allowed)! + "=" + value.addingPercentEncoding(withAllowedCharacters: allowed)!
        }.joined(separator: "&")
    }

    /// The endpoint, status and error code only.
    private func log(_ error: AppleServerError, endpoint: String, status: UInt?) {
        logger.warning(
            "apple request failed",
            metadata: ["endpoint": "\(endpoint)", "status": "\(status.map(String.init) ?? "-")", "code": "\(error.code)", "error": "\(error.message)"])
    }
}
