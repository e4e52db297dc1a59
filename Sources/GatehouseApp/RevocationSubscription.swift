import GatehouseContracts
import GatehouseRPC
import Gateway
import Logging

/// The token service's revocation feed (`session.revoked` and `token.heartbeat`), for the gateway.
enum RevocationSubscription {
    /// Subscribes at `endpoint` (every instance of a comma-separated list); the stream ends (and the gateway resubscribes) when the
    /// subscription fails or closes. A message that does not decode is dropped: the next
    /// heartbeat shows the gap, and the gateway reloads.
    static func stream(endpoint: String, curve: CurveClientKeys?, logger: Logger) -> AsyncStream<RevocationNotice> {
        let (stream, continuation) = AsyncStream.makeStream(of: RevocationNotice.self, bufferingPolicy: .bufferingNewest(10_000))
        let task = Task {
            do {
                let subscriber = try EventSubscriber(
                    endpoints: Config.splitEndpoints(endpoint), topics: [TokenAPI.Topic.sessionRevoked, TokenAPI.Topic.heartbeat], curve: curve, logger: logger)
                for await event in subscriber.events {
                    if Task.isCancelled { break }
                    switch event.topic {
                    case TokenAPI.Topic.sessionRevoked:
                        if let revoked = try? event.decode(SessionRevokedEvent.self) { continuation.yield(.revoked(revoked)) }
                    case TokenAPI.Topic.heartbeat:
                        if let beat = try? event.decode(RevocationHeartbeat.self) { continuation.yield(.heartbeat(beat)) }
                    default:
                        break
                    }
                }
                await subscriber.close()
            } catch {
                logger.error("cannot subscribe to session revocations at \(endpoint): \(error)")
                try? await Task.sleep(for: .seconds(1))
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}
