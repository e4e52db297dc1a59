/// Where the identity service publishes `user.*` events (the ZeroMQ PUB socket in production).
/// Best effort: publishing never fails the call that caused it.
public protocol EventSink: Sendable {
    /// Publishes `payload` (an encoded `UserEvent`) under `topic`.
    func publish(topic: String, payload: [UInt8]) async
}

/// Drops every event.
public struct DiscardingEventSink: EventSink {
    /// A sink that drops everything.
    public init() {}
    /// Drops the event.
    public func publish(topic: String, payload: [UInt8]) async {}
}
