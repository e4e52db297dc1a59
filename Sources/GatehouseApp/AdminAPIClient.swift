import AsyncHTTPClient
import Foundation
import GatehouseSupport
import NIOCore
import NIOHTTP1

/// The admin API over HTTP, for `gatehouse users` (issue 22 §2): `GATEHOUSE_ADMIN_URL` and the key
/// of `GATEHOUSE_ADMIN_KEY` (or `GATEHOUSE_ADMIN_KEY_FILE`).
///
/// Over AsyncHTTPClient, not Foundation's URL loading: FoundationNetworking links libcurl, which the server
/// image does not ship (a `--static-swift-stdlib` binary importing it needs `libcurl.so.4` at
/// start, for every role; issue 35).
public struct AdminAPIClient: Sendable {
    /// The admin listener's base URL.
    public let baseURL: URL
    let key: String
    let timeout: TimeInterval

    /// The largest answer read (a page of users or audit events is far smaller).
    static let maxResponseBytes = 64 << 20

    /// A failed call: the problem's code and detail, or why no answer came.
    public struct Failure: Error, CustomStringConvertible {
        /// The HTTP status (0: no answer).
        public var status: Int
        /// The problem's stable code (`invalid_admin_key`, …), or `unavailable`.
        public var code: String
        /// The problem's detail, for the operator.
        public var detail: String
        /// `error: DETAIL (CODE)`.
        public var description: String { "error: \(detail) (\(code))" }
    }

    /// A client configured by `config`; `ConfigError` naming the key for a bad URL or no key.
    public init(config: Config) throws {
        let urlKey = ConfigTable.adminURL
        let text = config.string(urlKey) ?? urlKey.defaultValue ?? ""
        guard let url = URL(string: text), url.scheme == "http" || url.scheme == "https", url.host != nil else {
            throw ConfigError(message: "\(urlKey.env) (\(urlKey.flag)) must be an http(s) URL, not \(text)")
        }
        baseURL = url
        if let path = config.string(ConfigTable.adminKeyFile), !path.isEmpty {
            guard let contents = SecretFiles.contents(atPath: path).map({ String(decoding: $0, as: UTF8.self) }) else {
                throw ConfigError(message: "\(ConfigTable.adminKeyFile.env) (\(ConfigTable.adminKeyFile.flag)): cannot read \(path)")
            }
            key = contents.trimmingCharacters(in: .whitespacesAndNewlines)
        } else if let value = config.string(ConfigTable.adminKey), !value.isEmpty {
            key = value
        } else {
            throw ConfigError(
                message: "no admin API key: set \(ConfigTable.adminKey.env) or \(ConfigTable.adminKeyFile.env) (make one with `gatehouse admin keys create --name NAME --scope all`)")
        }
        timeout = TimeInterval(try config.int(ConfigTable.rpcTimeoutMs)) / 1000 * 4
    }

    /// `method path` with `body` (JSON) and `query`; the decoded JSON object of a 2xx answer
    /// (empty for 204), or `Failure`.
    public func call(
        _ method: String, _ path: String, query: [(String, String)] = [], body: Any? = nil, rawBody: Data? = nil,
        contentType: String = "application/json", timeout: TimeInterval? = nil
    ) async throws -> [String: Any] {
        var components = URLComponents(url: baseURL.appendingPathComponent(path), resolvingAgainstBaseURL: false)!
        if !query.isEmpty { components.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) } }
        var request = HTTPClientRequest(url: components.url!.absoluteString)
        request.method = HTTPMethod(rawValue: method)
        request.headers.add(name: "Authorization", value: "Bearer \(key)")
        var bytes: Data?
        if let body { bytes = try JSONSerialization.data(withJSONObject: body) }
        if let rawBody { bytes = rawBody }
        if let bytes {
            request.headers.add(name: "Content-Type", value: contentType)
            request.body = .bytes(ByteBuffer(bytes: bytes))
        }
        let status: Int
        let data: Data
        do {
            let response = try await HTTPClient.shared.execute(request, timeout: .milliseconds(Int64((timeout ?? self.timeout) * 1000)))
            status = Int(response.status.code)
            data = Data(try await response.body.collect(upTo: Self.maxResponseBytes).readableBytesView)
        } catch {
            throw unreachable(error)
        }
        guard (200..<300).contains(status) else { throw Self.problem(status: status, body: data) }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
    }

    /// The failure of a call that got no answer (`error` says why).
    func unreachable(_ error: any Error) -> Failure {
        Failure(
            status: 0, code: "unavailable",
            detail: "no answer from the admin API at \(baseURL.absoluteString) (\(error)); is the identity role running, and is \(ConfigTable.adminURL.env) its admin listener?")
    }

    /// The failure of an answer of `status` whose body is `body` (a problem, when it is one).
    static func problem(status: Int, body: Data) -> Failure {
        let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:]
        return Failure(status: status, code: object["code"] as? String ?? "http_\(status)", detail: object["detail"] as? String ?? "HTTP \(status)")
    }
}

extension Config {
    /// Whether an admin API key is configured (`GATEHOUSE_ADMIN_KEY` or `GATEHOUSE_ADMIN_KEY_FILE`):
    /// then `gatehouse users import|export` and `gatehouse audit` go through the admin API, which
    /// every shape of deployment serves; without one they take the direct path, the identity
    /// service's RPC link with its own key.
    public var hasAdminKey: Bool {
        !(string(ConfigTable.adminKey) ?? "").isEmpty || !(string(ConfigTable.adminKeyFile) ?? "").isEmpty
    }
}
