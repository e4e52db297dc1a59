import Foundation
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import RPCRouting
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
    func take() -> AuditEvent? {
        state.withLock { s -> AuditEvent? in
            guard s.phase == .pending else { return nil }
            s.phase = .inFlight
            return s.event
        }
    }

    /// Drops the event: the write that would have carried it changed nothing (a delete that found
    /// no row), so nothing happened to record.
    func discard() {
        state.withLock { $0.phase = .written }
    }

    /// Ends a `take()`: written when its transaction committed, pending again when it did not.
    func settle(committed: Bool) {
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

extension IdentityHandlers {
    /// Runs `body` as the audited operation `kind`: its event is written with the first change
    /// the body commits, or when it returns without one. When the body throws an outcome worth
    /// recording (not an outage) before anything was written and `failure` is given, the event is
    /// written as `failure` with the error's code as its reason.
    func audited<T: Sendable>(
        _ kind: String, failure: String? = nil, actor: String = AuditEvent.Actor.user, userID: String = "",
        email: String = "", client: ClientInfo = ClientInfo(), sessionID: String = "",
        _ body: () async throws -> T
    ) async throws -> T {
        let recorder = AuditRecorder(
            AuditEvent(
                occurredAt: clock.now, kind: kind, userID: userID, actor: actor,
                email: email.truncated(toUTF8Bytes: 320), ip: client.ip.truncated(toUTF8Bytes: 64),
                userAgent: client.userAgent.truncated(toUTF8Bytes: 512), sessionID: sessionID))
        let result: T
        do {
            result = try await AuditScope.$current.withValue(recorder) { try await body() }
        } catch {
            if let failure, recorder.isPending, let code = Self.auditReason(error) {
                recorder.update {
                    $0.kind = failure
                    $0.reason = code
                }
                await appendAudit(recorder)
            }
            throw error
        }
        await appendAudit(recorder)
        return result
    }

    /// The reason a refused call is recorded with: its error's stable code; nil for outages and
    /// cancellation, which say nothing about the caller.
    static func auditReason(_ error: any Error) -> String? {
        guard let error = error as? IdentityError else { return nil }
        switch error {
        case .unavailable, .storage, .overloaded, .migrationRequired: return nil
        default: return error.code.rawValue
        }
    }

    /// Writes the recorder's event in a transaction of its own if no change wrote it. A failure
    /// to write is logged (the operation itself stands); a store without an audit log drops it.
    func appendAudit(_ recorder: AuditRecorder) async {
        guard recorder.isPending, let sqlite = store as? SQLiteUserStore else { return }
        do {
            try await AuditScope.$current.withValue(recorder) { try await sqlite.run { _ in } }
        } catch {
            logger.error("audit event \(recorder.event.kind) not written: \(error)")
        }
    }

    /// Notes `user` as the one the running call's audit event is about.
    func auditUser(_ user: UserID) {
        AuditScope.current?.update { $0.userID = user.rawValue }
    }
}

// `identity.listAudit`: pages of the log for `gatehouse audit`.
extension IdentityHandlers {
    /// Registers `identity.listAudit`.
    func registerAuditMethods(_ router: inout RPCRouter) {
        router.register(IdentityAPI.listAudit) { request, _ in try await listAudit(request) }
    }

    /// A page of the audit log (`identity.listAudit`): `invalidArgument` for a limit outside
    /// 0 … `maxAuditPage` or a user id over 128 bytes.
    public func listAudit(_ request: ListAuditRequest) async throws -> ListAuditResponse {
        let limit = try Self.auditPageLimit(request.limit)
        guard request.userID.utf8.count <= 128 else { throw IdentityError.invalidArgument(field: "userID", reason: "longer than 128 bytes") }
        guard let sqlite = store as? SQLiteUserStore else { throw IdentityError.unavailable(cause: "this store keeps no audit log") }
        let (events, next) = try await sqlite.auditEvents(after: request.afterSeq, userID: request.userID, since: request.since, limit: limit)
        return ListAuditResponse(events: events, nextAfterSeq: next)
    }

    /// The page size a `ListAuditRequest.limit` asks for: 0 is the maximum.
    static func auditPageLimit(_ limit: Int32) throws -> Int {
        guard (0...maxAuditPage).contains(limit) else {
            throw IdentityError.invalidArgument(field: "limit", reason: "must be between 0 and \(maxAuditPage)")
        }
        return limit == 0 ? Int(maxAuditPage) : Int(limit)
    }
}
