import Foundation
import GatehouseContracts
import Synchronization

// The audit log's write path (issue 22 §3). A handler runs its body under `audited(…)`, which
// puts an `AuditRecorder` on the task (`AuditScope.current`). The store's first write
// transaction on that task appends the event in the same transaction as the change
// (`SQLiteUserStore.run`); a call that wrote nothing (a refused sign-in, a no-op) appends it in
// a transaction of its own as it ends. So an event is never recorded for a change that did not
// commit, and a committed change never lacks its event.

/// The audit event of the identity call running on a task, written at most once.
public final class AuditRecorder: Sendable {
    private enum Phase { case pending, inFlight, written }
    private let state: Mutex<(event: AuditEvent, phase: Phase)>

    /// A recorder of `event`, not yet written.
    public init(_ event: AuditEvent) { state = Mutex((event, .pending)) }

    /// Changes the event before it is written (a user found on the way, a detail).
    public func update(_ change: (inout AuditEvent) -> Void) {
        state.withLock { change(&$0.event) }
    }

    /// The event as it stands.
    public var event: AuditEvent { state.withLock { $0.event } }

    /// Whether the event is still to be written.
    public var isPending: Bool { state.withLock { $0.phase == .pending } }

    /// The event for a write transaction that is about to commit, or nil when it was written (or
    /// is being written) already. `settle(committed:)` follows.
    public func take() -> AuditEvent? {
        state.withLock { s -> AuditEvent? in
            guard s.phase == .pending else { return nil }
            s.phase = .inFlight
            return s.event
        }
    }

    /// Drops the event: the write that would have carried it changed nothing (a delete that found
    /// no row), so nothing happened to record. Public for the PostgreSQL store (issue 24).
    public func discard() {
        state.withLock { $0.phase = .written }
    }

    /// Ends a `take()`: written when its transaction committed, pending again when it did not.
    public func settle(committed: Bool) {
        state.withLock { s in
            if s.phase == .inFlight { s.phase = committed ? .written : .pending }
        }
    }
}

/// Where the recorder of the running identity call lives.
public enum AuditScope {
    /// The audit recorder of the identity call this task runs, if any.
    @TaskLocal public static var current: AuditRecorder?
}
