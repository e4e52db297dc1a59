import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// JSON as the server writes it: RFC 3339 dates, with or without fractional seconds.
enum GatehouseJSON {
    static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let text = try decoder.singleValueContainer().decode(String.self)
            guard let date = parseDate(text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not an RFC 3339 date: \(text)"))
            }
            return date
        }
        return decoder
    }()

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(formatDate(date))
        }
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }()

    static func parseDate(_ text: String) -> Date? {
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = fractional.date(from: text) { return date }
        let whole = ISO8601DateFormatter()
        whole.formatOptions = [.withInternetDateTime]
        return whole.date(from: text)
    }

    static func formatDate(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }
}

/// One HTTP exchange with the gateway: requests made from a path and a JSON body, answers
/// checked for their status, problems turned into `GatehouseError`.
struct Transport: Sendable {
    let baseURL: URL
    let session: URLSession
    let timeout: TimeInterval

    struct Answer {
        let status: Int
        let body: Data
        let headers: [String: String]
    }

    /// The request for `method` `path` (with `query`), `body` as JSON, `bearer` as the access token.
    func request(_ method: String, _ path: String, query: [URLQueryItem] = [], body: [String: Any]? = nil, bearer: String? = nil) throws -> URLRequest {
        // Joined as text: `appendingPathComponent` would escape a `%` of the path again, and
        // doubles the slash after a base URL ending in one on some platforms.
        var base = baseURL.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        guard var components = URLComponents(string: base + path) else {
            throw GatehouseError.invalidResponse("bad base URL \(baseURL)")
        }
        if !query.isEmpty { components.queryItems = query }
        guard let url = components.url else { throw GatehouseError.invalidResponse("bad URL for \(path)") }
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        request.httpMethod = method
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        if let body {
            request.httpBody = try JSONSerialization.data(withJSONObject: body)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
        return request
    }

    /// Sends `request`; the answer whatever its status, or `network` when the server was not reached.
    func send(_ request: URLRequest) async throws -> Answer {
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await session.data(for: request)
        } catch let error as URLError {
            if error.code == .cancelled { throw CancellationError() }
            throw GatehouseError.network(code: error.code.rawValue, message: error.localizedDescription)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw GatehouseError.network(code: URLError.Code.unknown.rawValue, message: "\(error)")
        }
        guard let http = response as? HTTPURLResponse else { throw GatehouseError.invalidResponse("not an HTTP answer") }
        return Answer(status: http.statusCode, body: data, headers: http.lowercasedHeaders)
    }

    /// The error of an answer that is not a success.
    static func error(of answer: Answer) -> GatehouseError {
        GatehouseError.fromProblem(status: answer.status, body: answer.body, retryAfter: answer.headers["retry-after"])
    }

    /// `T` decoded from a success's body.
    static func decode<T: Decodable>(_ type: T.Type, _ answer: Answer) throws -> T {
        do {
            return try GatehouseJSON.decoder.decode(T.self, from: answer.body)
        } catch {
            throw GatehouseError.invalidResponse("cannot read \(T.self): \(error)")
        }
    }
}

extension HTTPURLResponse {
    /// The header fields, names in lower case.
    var lowercasedHeaders: [String: String] {
        var headers: [String: String] = [:]
        for (name, value) in allHeaderFields {
            headers[String(describing: name).lowercased()] = String(describing: value)
        }
        return headers
    }
}

/// The shapes of the server's answers.
struct SessionBody: Decodable {
    let accessToken: String
    let refreshToken: String
    let expiresIn: Int
}

struct UserAndSessionBody: Decodable {
    let user: User
    let session: SessionBody?
    let migration: Migration?
    let verificationRequired: Bool?
}

struct SessionOnlyBody: Decodable {
    let session: SessionBody
}

struct UserOnlyBody: Decodable {
    let user: User
}
