import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension GatehouseClient {
    /// The signed-in user, live (`GET /v1/me/events`): the user now, then the user after each
    /// change made anywhere (this device, another device, an administrator).
    ///
    /// - It reconnects by itself after a network failure or a server restart (with a growing
    ///   wait, from `Configuration.reconnectDelay`, at least the server's `retry:` and
    ///   `Retry-After`), resuming with `Last-Event-ID`: the server sends the changes after it, or
    ///   a fresh snapshot when they are no longer in its log.
    /// - It survives the access token's expiry: it refreshes the token and reconnects.
    /// - It ends with `streamClosed(reason:message:)` when the server ends it for good
    ///   (`account_deleted`, `account_disabled`, `migrated`, `signed_out`,
    ///   `signed_out_everywhere`, `session_revoked`, `too_many_streams`); all but the last end the
    ///   session, and the device is signed out. It ends with `notSignedIn` or `sessionEnded` when
    ///   there is no session to use, and with `streamClosed(reason: "signed_out")` when the device
    ///   signs out or in as someone else meanwhile.
    /// - Cancelling the consuming task closes the connection.
    /// - Its connections use the configuration of the client's `URLSession` (proxy, protocol
    ///   classes, TLS settings), not its delegate: a stream needs a delegate of its own.
    public func userUpdates() -> AsyncThrowingStream<User, any Error> {
        AsyncThrowingStream { continuation in
            let driver = Task { await self.runUserUpdates(continuation) }
            continuation.onTermination = { _ in driver.cancel() }
        }
    }

    /// The reasons of `event: closed` after which the device's session is over.
    static let sessionEndingReasons: Set<String> = [
        "account_deleted", "account_disabled", "migrated", "signed_out", "signed_out_everywhere", "session_revoked",
    ]

    private struct ClosedEvent: Decodable {
        let reason: String
        let resumable: Bool
        let message: String?
    }

    private struct UserEvent: Decodable {
        let user: User
    }

    private func runUserUpdates(_ output: AsyncThrowingStream<User, any Error>.Continuation) async {
        var lastEventID: String?
        var delay = configuration.reconnectDelay
        var serverRetry: TimeInterval = 0
        var retryAfter: TimeInterval = 0
        var refreshedFor401 = false
        /// The session this stream follows: a sign-out or another sign-in ends the stream.
        var following: Int?
        func pause() async {
            let wait = max(delay, serverRetry, retryAfter)
            delay = min(delay * 2, configuration.maximumReconnectDelay)
            retryAfter = 0
            try? await Task.sleep(nanoseconds: UInt64(max(wait, 0) * 1_000_000_000))
        }
        while !Task.isCancelled {
            let token: String
            let generation: Int
            do {
                (token, generation) = try await keeper.credentials()
            } catch let error as GatehouseError where error.isRetryable {
                await pause()
                continue
            } catch {
                output.finish(throwing: error)
                return
            }
            if let following, following != generation {
                output.finish(throwing: GatehouseError.streamClosed(reason: "signed_out", message: "Signed out on this device."))
                return
            }
            following = generation
            var request: URLRequest
            do {
                request = try transport.request("GET", "/v1/me/events", bearer: token)
            } catch {
                output.finish(throwing: error)
                return
            }
            request.setValue("text/event-stream", forHTTPHeaderField: "Accept")
            // The server sends a keep-alive comment every few seconds: a stream silent this long is dead.
            request.timeoutInterval = max(configuration.requestTimeout, 120)
            if let lastEventID { request.setValue(lastEventID, forHTTPHeaderField: "Last-Event-ID") }
            var closedReason: String?
            var status = 0
            do {
                for try await item in EventSourceConnection.open(request, base: transport.session.configuration, idleTimeout: request.timeoutInterval) {
                    switch item {
                    case .opened(let opened, let headers):
                        status = opened
                        if opened == 200 {
                            refreshedFor401 = false
                            delay = configuration.reconnectDelay
                        } else if let seconds = headers["retry-after"].flatMap({ TimeInterval($0.trimmingCharacters(in: .whitespaces)) }) {
                            retryAfter = min(seconds, configuration.maximumReconnectDelay)
                        }
                    case .refused(let body):
                        throw GatehouseError.fromProblem(status: status, body: body, retryAfter: nil)
                    case .event(let event):
                        if let id = event.id { lastEventID = id }
                        if let retry = event.retry { serverRetry = TimeInterval(retry) / 1000 }
                        switch event.name {
                        case "snapshot", "change":
                            let user = try GatehouseJSON.decoder.decode(UserEvent.self, from: Data(event.data.utf8)).user
                            await keeper.update(user: user, ifGeneration: generation)
                            output.yield(user)
                        case "token_expiring":
                            // Refresh ahead, so the reconnection after `token_expired` is quick.
                            _ = try? await keeper.accessToken(force: token)
                        case "closed":
                            let closed = try GatehouseJSON.decoder.decode(ClosedEvent.self, from: Data(event.data.utf8))
                            if !closed.resumable {
                                if Self.sessionEndingReasons.contains(closed.reason) {
                                    await keeper.end(ifGeneration: generation, because: .sessionEnded(code: closed.reason))
                                }
                                output.finish(throwing: GatehouseError.streamClosed(reason: closed.reason, message: closed.message ?? ""))
                                return
                            }
                            closedReason = closed.reason
                        default:
                            break
                        }
                    }
                }
            } catch is CancellationError {
                output.finish()
                return
            } catch let error as GatehouseError {
                switch error {
                case _ where error.isRetryable:
                    await pause()
                    continue
                case .server(_, "invalid_last_event_id", _):
                    // The id is not one the server knows (another server's, or garbled): a fresh snapshot.
                    lastEventID = nil
                    continue
                case .sessionEnded(let code) where (code == "token_expired" || code == "invalid_token") && !refreshedFor401:
                    // The device's clock was behind the server's: refresh once and reconnect.
                    refreshedFor401 = true
                    do { _ = try await keeper.accessToken(force: token) } catch let error as GatehouseError where error.isRetryable {
                        await pause()
                    } catch {
                        output.finish(throwing: error)
                        return
                    }
                    continue
                case .sessionEnded:
                    await keeper.end(ifGeneration: generation, because: error)
                    output.finish(throwing: error)
                    return
                default:
                    output.finish(throwing: error)
                    return
                }
            } catch {
                output.finish(throwing: GatehouseError.invalidResponse("\(error)"))
                return
            }
            if Task.isCancelled { break }
            switch closedReason {
            case "token_expired":
                // The server closed the stream as the token expired: a new token, at once.
                do { _ = try await keeper.accessToken(force: token) } catch let error as GatehouseError where error.isRetryable {
                    await pause()
                } catch {
                    output.finish(throwing: error)
                    return
                }
            default:
                // `shutting_down`, `resync`, or the connection dropped: again, after a wait.
                await pause()
            }
        }
        output.finish()
    }
}
