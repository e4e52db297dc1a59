import Foundation
import GatehouseContracts
import GatehouseSupport
import ProtoCodec
import Synchronization

/// Numbers the token service's `session.revoked` events and beats its `token.heartbeat`.
///
/// Each start of the service draws a new random `epoch`; within it every published revocation
/// gets the next `seq` (1, 2, 3, …), assigned and handed to the publisher under one lock, so the
/// events leave in order without gaps. A heartbeat carries the last `seq`, so a subscriber that
/// lost an event, or whose publisher restarted (another epoch), finds out within one beat even
/// when no further revocation comes, and reloads `token.listRevocations`.
public final class RevocationFeed: Sendable {
    /// Random, new at each start of the token service.
    public let epoch: String
    private let seq = Mutex<UInt64>(0)
    private let publish: @Sendable (String, [UInt8]) -> Void

    /// A feed of a new epoch drawn from `random`, publishing through `publish` (topic, payload).
    public init(random: @Sendable (Int) -> [UInt8], publish: @escaping @Sendable (String, [UInt8]) -> Void) {
        epoch = Base64URL.encode(random(12))
        self.publish = publish
    }

    /// The number of the last published revocation of this epoch (0: none yet).
    public var position: UInt64 { seq.withLock { $0 } }

    /// Publishes `event` (its epoch and seq filled in) as the next revocation. The service calls
    /// it for each revocation it has committed.
    public func announce(_ event: SessionRevokedEvent) {
        seq.withLock { seq in
            var event = event
            event.epoch = epoch
            event.seq = seq + 1
            guard let payload = try? ProtobufEncoder().encode(event) else { return }
            seq += 1
            publish(TokenAPI.Topic.sessionRevoked, payload)
        }
    }

    /// Publishes a `token.heartbeat` with the current position.
    public func heartbeat() {
        seq.withLock { seq in
            guard let payload = try? ProtobufEncoder().encode(RevocationHeartbeat(epoch: epoch, seq: seq)) else { return }
            publish(TokenAPI.Topic.heartbeat, payload)
        }
    }
}
