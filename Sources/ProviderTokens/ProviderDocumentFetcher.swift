import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// A JSON document fetched from a provider, with how long it may be cached.
struct FetchedDocument: Sendable {
    var body: Data
    /// `Cache-Control: max-age` less `Age`, in seconds; nil when the response says nothing.
    var maxAge: TimeInterval?
}

/// GETs provider documents (JWKS, discovery) with AsyncHTTPClient under one deadline that
/// covers connecting, the head and the whole body: a provider that never answers, or stops in
/// the middle of the body, costs `timeout` and gives `provider_unavailable`, never a hang.
struct ProviderDocumentFetcher: Sendable {
    let client: HTTPClient
    let timeout: Duration
    let maxBytes: Int
    let logger: Logger

    /// The document at `url`, or `providerUnavailable` (connection refused, timeout, a status
    /// other than 200, a body over `maxBytes`, a redirect to an address the provider's rules refuse).
    func get(_ url: URL, provider: ProviderConfiguration) async throws(ProviderTokenError) -> FetchedDocument {
        let timeout = self.timeout
        // Whichever ends first, the fetch or the timer, answers; the other is cancelled and not
        // waited for (a stalled body cannot hold the caller even if it ignored cancellation).
        let outcome = FirstOutcome<Result<FetchedDocument, ProviderTokenError>>()
        let fetch = Task { outcome.offer(await self.attempt(url, provider: provider)) }
        let timer = Task {
            // The deadline runs on elapsed time (ContinuousClock), not on the injected wall clock.
            try? await Task.sleep(for: timeout)
            outcome.offer(.failure(.providerUnavailable(provider: provider.name, detail: "no answer within \(Self.describe(timeout))")))
        }
        let result = await outcome.value
        fetch.cancel()
        timer.cancel()
        switch result {
        case .success(let document): return document
        case .failure(let error):
            logger.warning(
                "provider document fetch failed",
                metadata: ["provider": "\(provider.name)", "url": "\(url.absoluteString)", "error": "\(error.message)"])
            throw error
        }
    }

    private func attempt(_ url: URL, provider: ProviderConfiguration) async -> Result<FetchedDocument, ProviderTokenError> {
        func unavailable(_ detail: String) -> Result<FetchedDocument, ProviderTokenError> {
            .failure(.providerUnavailable(provider: provider.name, detail: detail))
        }
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = .GET
        request.headers.add(name: "Accept", value: "application/json")
        let response: HTTPClientResponse
        do {
            // The client's own deadline is only a backstop: the timer in `get` answers first.
            response = try await client.execute(request, deadline: .now() + Self.timeAmount(timeout) + .seconds(1), logger: logger)
        } catch {
            return unavailable("\(url.host ?? "the provider") could not be reached: \(Self.describe(error))")
        }
        if let final = response.url, final != url {
            do throws(ProviderConfigurationError) {
                try ProviderConfiguration.checkAddress(
                    final, provider: provider.name, allowInsecureLoopback: provider.allowInsecureLoopback)
            } catch {
                return unavailable("redirected to an address that is not allowed: \(error.message)")
            }
        }
        guard response.status == .ok else {
            return unavailable("\(url.absoluteString) answered HTTP \(response.status.code)")
        }
        let body: ByteBuffer
        do {
            body = try await response.body.collect(upTo: maxBytes)
        } catch is NIOTooManyBytesError {
            return unavailable("\(url.absoluteString) sent more than \(maxBytes) bytes")
        } catch {
            return unavailable("\(url.absoluteString) failed while sending its body: \(Self.describe(error))")
        }
        return .success(FetchedDocument(body: Data(body.readableBytesView), maxAge: Self.maxAge(response.headers)))
    }

    /// `max-age` (or `s-maxage`) of `Cache-Control` less `Age`; 0 for `no-store`/`no-cache`.
    static func maxAge(_ headers: HTTPHeaders) -> TimeInterval? {
        var maxAge: TimeInterval?
        for value in headers["Cache-Control"] {
            for directive in value.split(separator: ",") {
                let parts = directive.split(separator: "=", maxSplits: 1).map {
                    $0.trimmingCharacters(in: .whitespaces).lowercased()
                }
                guard let name = parts.first else { continue }
                switch name {
                case "no-store", "no-cache": return 0
                case "max-age", "s-maxage":
                    if parts.count == 2, let seconds = Int(parts[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))),
                        seconds >= 0
                    {
                        maxAge = min(maxAge ?? .infinity, TimeInterval(seconds))
                    }
                default: continue
                }
            }
        }
        guard let maxAge else { return nil }
        let age = headers.first(name: "Age").flatMap { Int($0.trimmingCharacters(in: .whitespaces)) } ?? 0
        return max(0, maxAge - TimeInterval(max(0, age)))
    }

    static func timeAmount(_ duration: Duration) -> TimeAmount {
        let (seconds, attoseconds) = duration.components
        return .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    static func describe(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        return "\(seconds * 1000 + attoseconds / 1_000_000_000_000_000) ms"
    }

    /// A short description of a client error (no request contents are in it).
    static func describe(_ error: any Error) -> String {
        String(describing: error).truncatedForDetail
    }
}

/// The first value offered, handed to the one waiter; later offers are dropped.
final class FirstOutcome<Value: Sendable>: Sendable {
    private enum State {
        case waiting(CheckedContinuation<Value, Never>?)
        case done(Value)
    }

    private let state = Mutex<State>(.waiting(nil))

    /// Settles the outcome with `value` unless it is already settled.
    func offer(_ value: Value) {
        let waiter: CheckedContinuation<Value, Never>? = state.withLock { state in
            guard case .waiting(let continuation) = state else { return nil }
            state = .done(value)
            return continuation
        }
        waiter?.resume(returning: value)
    }

    /// The first value offered (waits for it).
    var value: Value {
        get async {
            await withCheckedContinuation { continuation in
                let ready: Value? = state.withLock { state in
                    switch state {
                    case .done(let value): return value
                    case .waiting:
                        state = .waiting(continuation)
                        return nil
                    }
                }
                if let ready { continuation.resume(returning: ready) }
            }
        }
    }
}

extension String {
    /// At most 200 characters, for an error detail.
    fileprivate var truncatedForDetail: String {
        count <= 200 ? self : String(prefix(200)) + "…"
    }
}
