import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

extension Run {
    // MARK: Requests

    /// The outcome of one request, with what a success yields.
    struct Step<Value: Sendable>: Sendable {
        var outcome: RequestOutcome
        var value: Value?
        /// Body excerpt for unexpected statuses.
        var detail: String = ""

        func recorded(_ run: Run, _ operation: Operation) -> RequestOutcome {
            if case .unexpectedStatus(let status) = outcome {
                run.tallies.withLock { tallies in
                    tallies[operation, default: OperationTally(highestMicros: run.highestMicros)].noteStatusSample(status, detail)
                }
            }
            return outcome
        }
    }

    struct Exchange {
        var status: Int
        var body: [UInt8]
    }

    static let maxBody = 1 << 20

    /// One HTTP exchange, or a classified transport failure.
    func send(_ method: HTTPMethod, _ path: String, json: KeyValuePairs<String, String>? = nil, bearer: String? = nil) async -> Result<Exchange, TransportFailure> {
        let body = json.map(Self.jsonObject)
        var headers: [(String, String)] = [("Accept", "application/json")]
        if let bearer { headers.append(("Authorization", "Bearer \(bearer)")) }
        if body != nil { headers.append(("Content-Type", "application/json")) }
        switch engine {
        case .loop(let client):
            do {
                let response = try await client.execute(method: method.rawValue, path: path, headers: headers, body: body)
                return .success(Exchange(status: response.status, body: response.body))
            } catch {
                return .failure(TransportFailure(error))
            }
        case .lean(let client):
            do {
                let response = try await client.execute(method: method.rawValue, path: path, headers: headers, body: body)
                return .success(Exchange(status: response.status, body: Array(response.body.readableBytesView)))
            } catch {
                return .failure(TransportFailure(error))
            }
        case .asyncHTTPClient(let client):
            var request = HTTPClientRequest(url: target.url(path))
            request.method = method
            for (name, value) in headers { request.headers.add(name: name, value: value) }
            if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
            do {
                let response = try await client.execute(request, timeout: .milliseconds(Int64(config.timeout * 1000)))
                let buffer = try await response.body.collect(upTo: Self.maxBody)
                return .success(Exchange(status: Int(response.status.code), body: Array(buffer.readableBytesView)))
            } catch {
                return .failure(TransportFailure(error))
            }
        }
    }

    /// A flat JSON object of strings, in the given order (the request bodies are all this shape).
    static func jsonObject(_ fields: KeyValuePairs<String, String>) -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "{")]
        for (index, (key, value)) in fields.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            appendJSONString(key, to: &out)
            out.append(UInt8(ascii: ":"))
            appendJSONString(value, to: &out)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    static func appendJSONString(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                out.append(UInt8(ascii: "\\"))
                out.append(byte)
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default:
                out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    func check<T: Sendable>(_ exchange: Result<Exchange, TransportFailure>, expect status: Int,
                  _ body: ([UInt8]) -> ResponseChecks.Outcome<T>) -> Step<T> {
        switch exchange {
        case .failure(let failure):
            return Step(outcome: .transport(kind: failure.kind, detail: failure.detail))
        case .success(let exchange) where exchange.status != status:
            let excerpt = String(decoding: exchange.body.prefix(300), as: UTF8.self)
            return Step(outcome: .unexpectedStatus(exchange.status), detail: excerpt)
        case .success(let exchange):
            switch body(exchange.body) {
            case .ok(let value): return Step(outcome: .success, value: value)
            case .bad(let reason): return Step(outcome: .badBody(reason))
            }
        }
    }

    func signUp(email: String) async -> Step<SetupUser> {
        let exchange = await send(.POST, "/v1/accounts", json: ["email": email, "password": config.password, "displayName": "Load Test"])
        return check(exchange, expect: 201) { ResponseChecks.checkAuth($0, email: email) }
    }

    func signIn(email: String) async -> Step<SetupUser> {
        let exchange = await send(.POST, "/v1/sessions", json: ["email": email, "password": config.password])
        return check(exchange, expect: 200) { ResponseChecks.checkAuth($0, email: email) }
    }

    func me(accessToken: String, expectedID: String) async -> Step<String> {
        let exchange = await send(.GET, "/v1/me", bearer: accessToken)
        return check(exchange, expect: 200) { ResponseChecks.checkMe($0, expectedID: expectedID) }
    }

    func refresh(_ token: String) async -> Step<SessionTokens> {
        let exchange = await send(.POST, "/v1/sessions/refresh", json: ["refreshToken": token])
        return check(exchange, expect: 200) { ResponseChecks.checkRefresh($0, presented: token) }
    }

    /// The `provider` scenario's subject and email of user `n`.
    func providerSubject(_ n: Int) -> String { "load-\(config.runID)-\(n)" }
    func providerEmail(_ n: Int) -> String { "load-\(config.runID)-p\(n)@example.com" }

    /// A provider sign-in with the next presigned token (or, past them, a fresh one of subject
    /// `n`): a new `jti` each, never a replay.
    func providerSignIn(subject n: Int) async -> Step<SetupUser> {
        let taken = presigned.withLock { state -> (Int, String)? in
            guard state.next < state.tokens.count else { return nil }
            defer { state.next += 1 }
            return state.tokens[state.next]
        }
        let subject: Int, token: String
        if let taken {
            (subject, token) = taken
        } else if let signer = providerSigner {
            (subject, token) = (n, signer.idToken(subject: providerSubject(n), email: providerEmail(n), audience: config.providerAudience))
        } else {
            return Step(outcome: .transport(kind: "no_provider_key", detail: "the provider scenario needs --provider-key"))
        }
        let email = providerEmail(subject)
        let exchange = await send(.POST, "/v1/sessions/provider", json: ["provider": "google.com", "idToken": token])
        return check(exchange, expect: 200) { ResponseChecks.checkAuth($0, email: email) }
    }

    func rawGet() async -> Step<Bool> {
        let exchange = await send(.GET, config.path, bearer: config.bearer)
        return check(exchange, expect: 200) { _ in .ok(true) }
    }
}

/// A request that got no usable response, by kind.
struct TransportFailure: Error {
    var kind: String
    var detail: String

    init(_ error: any Error) {
        detail = String(describing: error)
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout, .writeTimeout, .connectTimeout, .getConnectionFromPoolTimeout:
                kind = "timeout"
            case .remoteConnectionClosed:
                kind = "connection_closed"
            case .cancelled:
                kind = "cancelled"
            default:
                kind = "other"
            }
        } else if let failure = error as? LeanHTTPClient.Failure {
            kind = failure.kind.rawValue
        } else if let failure = error as? LoopHTTPClient.Failure {
            kind = failure.kind.rawValue
        } else if error is NIOTooManyBytesError {
            kind = "body_too_large"
        } else if let channelError = error as? ChannelError, case .connectTimeout = channelError {
            kind = "timeout"
        } else if error is NIOConnectionError {
            kind = "connect"
        } else if let io = error as? IOError {
            kind = [ECONNREFUSED, ECONNRESET, EHOSTUNREACH, ENETUNREACH].contains(io.errnoCode) ? "connect" : "io"
        } else if error is ChannelError {
            kind = "connection_closed"
        } else {
            kind = "other"
        }
    }
}
