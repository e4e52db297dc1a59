import GatehouseContracts
import GatehouseRPC
import Logging

/// The token service's `session.revoked` feed as a stream of session ids, for the gateway.
enum RevocationSubscription {
    /// Subscribes at `endpoint`; the stream ends (and the gateway resubscribes) when the
    /// subscription fails or closes.
    static func stream(endpoint: String, curve: CurveClientKeys?, logger: Logger) -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingNewest(10_000))
        let task = Task {
            do {
                let subscriber = try EventSubscriber(endpoints: [endpoint], topics: [TokenAPI.Topic.sessionRevoked], curve: curve, logger: logger)
                for await event in subscriber.events {
                    if Task.isCancelled { break }
                    if let revoked = try? event.decode(SessionRevokedEvent.self) { continuation.yield(revoked.sessionID) }
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
