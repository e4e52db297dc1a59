import GatehouseContracts
import GatehouseRPC
import Gateway
import Logging

/// The identity service's change feed (`user.changed` and `identity.heartbeat`), for the
/// gateway's `GET /v1/me/events`.
enum ChangeSubscription {
    /// Subscribes at `endpoint` (every instance of a comma-separated list); the stream ends (and the gateway resubscribes) when the
    /// subscription fails or closes. A message that does not decode is dropped: the next event
    /// or heartbeat shows the gap, and the gateway lists the missing changes.
    static func stream(endpoint: String, curve: CurveClientKeys?, logger: Logger) -> AsyncStream<ChangeNotice> {
        let (stream, continuation) = AsyncStream.makeStream(of: ChangeNotice.self, bufferingPolicy: .bufferingNewest(10_000))
        let task = Task {
            do {
                let subscriber = try EventSubscriber(
                    endpoints: Config.splitEndpoints(endpoint), topics: [IdentityAPI.Topic.userChanged, IdentityAPI.Topic.changeFeedHeartbeat], curve: curve,
                    logger: logger)
                for await event in subscriber.events {
                    if Task.isCancelled { break }
                    switch event.topic {
                    case IdentityAPI.Topic.userChanged:
                        if let change = try? event.decode(UserChange.self) { continuation.yield(.changed(change)) }
                    case IdentityAPI.Topic.changeFeedHeartbeat:
                        if let beat = try? event.decode(ChangeFeedHeartbeat.self) { continuation.yield(.heartbeat(beat)) }
                    default:
                        break
                    }
                }
                await subscriber.close()
            } catch {
                logger.error("cannot subscribe to user changes at \(endpoint): \(error)")
                try? await Task.sleep(for: .seconds(1))
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}
