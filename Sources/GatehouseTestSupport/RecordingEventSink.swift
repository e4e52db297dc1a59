import GatehouseContracts
import IdentityService
import ProtoCodec
import Synchronization

/// Keeps every published event in memory, in order: the identity service's `EventSink`, and
/// through `record(_:_:)` the token service's `publish` closure.
public final class RecordingEventSink: EventSink, Sendable {
    private let stored = Mutex<[(topic: String, payload: [UInt8])]>([])

    /// An empty recorder.
    public init() {}

    /// Records the event (the `EventSink` requirement).
    public func publish(topic: String, payload: [UInt8]) async {
        record(topic, payload)
    }

    /// Records the event; has the shape of `TokenService.start`'s `publish` closure.
    @Sendable public func record(_ topic: String, _ payload: [UInt8]) {
        stored.withLock { $0.append((topic, payload)) }
    }

    /// The events so far, in order.
    public var events: [(topic: String, payload: [UInt8])] { stored.withLock { $0 } }

    /// The topics so far, in order.
    public var topics: [String] { events.map(\.topic) }

    /// The payloads decoded as `T`, with their topics.
    public func decoded<T: Decodable>(as type: T.Type) throws -> [(topic: String, event: T)] {
        try events.map { ($0.topic, try ProtobufDecoder().decode(T.self, from: $0.payload)) }
    }

    /// The payloads decoded as the identity service's `UserEvent`s, with their topics.
    public func decoded() throws -> [(topic: String, event: UserEvent)] { try decoded(as: UserEvent.self) }
}
