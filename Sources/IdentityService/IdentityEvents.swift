import Foundation
import IdentityCore
import ProtoCodec
import GatehouseContracts

/// Where the identity service publishes `user.*` events (the ZeroMQ PUB socket in production).
/// Best effort: publishing never fails the call that caused it.
public protocol EventSink: Sendable {
    /// Publishes `payload` (an encoded `UserEvent`) under `topic`.
    func publish(topic: String, payload: [UInt8]) async
}

/// Drops every event.
public struct DiscardingEventSink: EventSink {
    public init() {}
    public func publish(topic: String, payload: [UInt8]) async {}
}

/// Keeps every event in memory, for tests.
public final class RecordingEventSink: EventSink, @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [(topic: String, payload: [UInt8])] = []

    public init() {}

    public func publish(topic: String, payload: [UInt8]) async {
        lock.withLock { stored.append((topic, payload)) }
    }

    /// The events so far, in order.
    public var events: [(topic: String, payload: [UInt8])] { lock.withLock { stored } }

    /// The topics so far, in order.
    public var topics: [String] { events.map(\.topic) }

    /// The events decoded as `UserEvent`s.
    public func decoded() throws -> [(topic: String, event: UserEvent)] {
        try events.map { ($0.topic, try ProtobufDecoder().decode(UserEvent.self, from: $0.payload)) }
    }
}
