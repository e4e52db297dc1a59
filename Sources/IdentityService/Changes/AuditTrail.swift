import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import Logging
import RPCRouting
import Synchronization

/// Writes each call's audit event: with the first change the call commits (the store takes it
/// from `AuditScope`), or on its own when the call wrote nothing.
public struct AuditTrail: Sendable {
    /// Where the events go.
    let store: any AuditLogStore
    /// Samples throttled refusals (one per key a minute).
    let sampler: AuditSampler
    let clock: WallClock
    let logger: Logger

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
            guard let failure, let code = Self.auditReason(error), sampler.admits(code: code, event: recorder.event, now: clock.now) else {
                throw error
            }
            if recorder.isPending {
                recorder.update {
                    $0.kind = failure
                    $0.reason = code
                }
                await appendAudit(recorder)
            } else {
                // The success was written with a change (the sign-in's stamp), then the call was
                // refused after all (the session confirmed against a change that raced it): say so.
                var refused = recorder.event
                refused.kind = failure
                refused.reason = code
                refused.occurredAt = clock.now
                await appendAudit(AuditRecorder(refused))
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
        // Outages, a question to the client, and malformed input: nothing about an account.
        case .unavailable, .storage, .overloaded, .migrationRequired, .invalidEmail, .invalidArgument, .providerUnavailable, .unknownProvider:
            return nil
        default: return error.code.rawValue
        }
    }

    /// Writes the recorder's event in a transaction of its own if no change wrote it. A failure
    /// to write is logged (the operation itself stands).
    func appendAudit(_ recorder: AuditRecorder) async {
        guard recorder.isPending else { return }
        do {
            try await AuditScope.$current.withValue(recorder) { try await store.recordPendingAudit() }
        } catch {
            logger.error("audit event \(recorder.event.kind) not written: \(error)")
        }
    }
}

/// `identity.listAudit`: pages of the log for `gatehouse audit`.
public struct AuditHandlers: Sendable {
    let store: any AuditLogStore

    /// Registers `identity.listAudit`.
    func register(_ router: inout RPCRouter) {
        router.register(IdentityAPI.listAudit) { request, _ in try await listAudit(request) }
    }

    /// A page of the audit log (`identity.listAudit`): `invalidArgument` for a limit outside
    /// 0 … `maxAuditPage` or a user id over 128 bytes.
    public func listAudit(_ request: ListAuditRequest) async throws -> ListAuditResponse {
        let limit = try Self.auditPageLimit(request.limit)
        guard request.userID.utf8.count <= 128 else { throw IdentityError.invalidArgument(field: "userID", reason: "longer than 128 bytes") }
        var page = request
        page.limit = Int32(limit)
        page.since = try IdentityInput.auditableDate(request.since, "since")
        return try await store.auditEvents(page)
    }

    /// The page size a `ListAuditRequest.limit` asks for: 0 is the maximum.
    static func auditPageLimit(_ limit: Int32) throws -> Int {
        guard (0...maxAuditPage).contains(limit) else {
            throw IdentityError.invalidArgument(field: "limit", reason: "must be between 0 and \(maxAuditPage)")
        }
        return limit == 0 ? Int(maxAuditPage) : Int(limit)
    }
}

/// Keeps refusals that cost an attacker nothing (a throttled attempt) from each becoming a row:
/// the first of a kind per address (or user) and client address is recorded, then at most one a
/// minute. Bounded: past `capacity` keys it starts over.
public final class AuditSampler: Sendable {
    private let seen = Mutex<[String: Date]>([:])
    let capacity: Int
    let interval: TimeInterval

    /// A sampler of at most `capacity` keys, one event per key per `interval` seconds.
    public init(capacity: Int = 100_000, interval: TimeInterval = 60) {
        self.capacity = capacity
        self.interval = interval
    }

    /// Whether a refusal with `code` of `event` is recorded now. Only throttling is sampled.
    func admits(code: String, event: AuditEvent, now: Date) -> Bool {
        guard code == ErrorCode.tooManyAttempts.rawValue || code == ErrorCode.rateLimited.rawValue else { return true }
        let key = "\(event.kind)|\(event.email)|\(event.userID)|\(event.ip)"
        return seen.withLock { seen in
            if let last = seen[key], now.timeIntervalSince(last) < interval { return false }
            if seen.count >= capacity { seen.removeAll(keepingCapacity: true) }
            seen[key] = now
            return true
        }
    }
}
