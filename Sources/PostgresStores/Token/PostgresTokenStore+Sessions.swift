import Foundation
import GatehouseContracts
import GatehouseSupport
import PostgresNIO
import TokenCore
import TokenPorts

extension PostgresTokenStore {
    // MARK: Sessions

    /// Stores a new session with its first refresh token (by hash): one statement, so one
    /// transaction and one round trip.
    public func createSession(_ s: StoredSession, refreshHash: Data) async throws {
        try await run { [self] connection in
            try await rows(
                """
                WITH session AS (
                    INSERT INTO token_session (id, user_id, created_at, auth_time, amr, user_agent, ip, last_used_at, expires_at, current_hash)
                    VALUES (\(s.id), \(s.userID), \(Self.ms(s.createdAt)), \(Self.ms(s.authTime)), \(s.amr.joined(separator: " ")),
                        \(s.client.userAgent), \(s.client.ip), \(Self.ms(s.lastUsedAt)), \(Self.ms(s.expiresAt)), \(refreshHash))
                    RETURNING id
                )
                INSERT INTO token_refresh_token (hash, session_id, created_at) SELECT \(refreshHash), id, \(Self.ms(s.createdAt)) FROM session
                """, on: connection)
        }
    }

    /// The session a refresh token belongs to (whatever the token's state): one indexed
    /// look-up, one round trip.
    public func session(forRefreshHash hash: Data) async throws -> StoredSession? {
        try await run { [self] connection in
            try Self.first(await prepared(SessionByRefreshHash(hash: hash), on: connection))
        }
    }

    /// The session with this id, or nil.
    public func session(id: String) async throws -> StoredSession? {
        try await run { [self] connection in
            try Self.first(await rows("SELECT \(unescaped: Self.sessionColumns) FROM token_session WHERE id = \(id)", on: connection))
        }
    }

    /// The user's sessions, oldest first.
    public func sessions(userID: String) async throws -> [StoredSession] {
        try await run { [self] connection in
            try Self.all(await rows(
                "SELECT \(unescaped: Self.sessionColumns) FROM token_session WHERE user_id = \(userID) ORDER BY created_at, ord",
                on: connection))
        }
    }

    /// The first session of `rows`, or nil.
    static func first(_ rows: [PostgresRow]) throws -> StoredSession? {
        try rows.first.map { session(try $0.decode(SessionTuple.self)) }
    }

    /// Every session of `rows`, in order.
    static func all(_ rows: [PostgresRow]) throws -> [StoredSession] {
        try rows.map { session(try $0.decode(SessionTuple.self)) }
    }

    /// The session's current refresh-token hash (for tests).
    public func currentHash(sessionID: String) async throws -> Data? {
        try await run { [self] connection in
            try await rows("SELECT current_hash FROM token_session WHERE id = \(sessionID)", on: connection)
                .first?.decode(Data?.self) ?? nil
        }
    }

    /// Whether a session is revoked (or unknown).
    public func isRevoked(sessionID: String) async throws -> Bool {
        try await run { [self] connection in
            guard let row = try await rows("SELECT revoked_at FROM token_session WHERE id = \(sessionID)", on: connection).first
            else { return true }
            return try row.decode(Int64?.self) != nil
        }
    }

    /// For each of `userIDs` with at least one stored session, the latest `lastUsedAt` of its
    /// sessions (revoked and expired ones included). Writes nothing.
    public func lastActivity(userIDs: [String]) async throws -> [String: Date] {
        guard !userIDs.isEmpty else { return [:] }
        let unique = Array(Set(userIDs))
        return try await run { [self] connection in
            var result: [String: Date] = [:]
            for row in try await rows(
                "SELECT user_id, max(last_used_at) FROM token_session WHERE user_id = ANY(\(unique)) GROUP BY user_id", on: connection)
            {
                let (user, last) = try row.decode((String, Int64).self)
                result[user] = Date(millisecondsSince1970: last)
            }
            return result
        }
    }

    // MARK: Rotation

    /// Rotates the refresh token `hash` to `successorHash`, with the outcomes of `RefreshRotation`'s decision.
    ///
    /// One statement, one round trip, for a rotation: it finds the token's session and locks
    /// its row (`FOR UPDATE`), and, when the token is the session's current one and the session
    /// is live, moves the session to the successor and inserts it. A rotation of the same token
    /// elsewhere waits for that lock and then reads the session as rotated: its token is no
    /// longer current, so it rotates nothing (a grace replay, or reuse). Live means what
    /// SQLite's store checks in Swift, in whole milliseconds (`floorMS`, `ceilMS`), so both
    /// decide alike to the millisecond.
    ///
    /// The outcomes that write nothing (invalid, revoked, expired, grace replay) are answered
    /// from the row that statement locked. Reuse revokes: `rotateLocked` decides again, under
    /// the lock, in a transaction that revokes, numbers and records it.
    public func rotate(
        hash: Data, successorHash: Data, now: Date, grace: TimeInterval, idleTimeout: TimeInterval
    ) async throws -> RotationOutcome {
        let at = Self.ms(now)
        let statement = RotateCurrent(
            hash: hash, successorHash: successorHash, at: at, floorNow: Self.floorMS(now), idle: Self.ceilMS(idleTimeout))
        let found = try await run { [self] connection in
            try Self.lockedToken(await prepared(statement, on: connection))
        }
        guard let found else { return .invalid }
        var session = found.session
        if found.rotated {
            session.lastUsedAt = now
            return .rotated(session)
        }
        switch Self.decide(found, hash: hash, successorHash: successorHash, now: now, grace: grace, idleTimeout: idleTimeout) {
        case .revoked: return .revoked(session)
        case .expired: return .expired(session)
        case .graceReplay: return .graceReplay(session)
        case .rotate, .reuse:
            return try await rotateLocked(hash: hash, successorHash: successorHash, now: now, grace: grace, idleTimeout: idleTimeout)
        }
    }

    /// `rotate` in a transaction, deciding in Swift (`RefreshRotation`), on the
    /// session row locked first: the reuse path (revoke, number, record), and a token that the
    /// one-statement path found current but (by a fraction of a millisecond) not live.
    func rotateLocked(
        hash: Data, successorHash: Data, now: Date, grace: TimeInterval, idleTimeout: TimeInterval
    ) async throws -> RotationOutcome {
        try await transaction { [self] connection in
            guard let found = try Self.lockedToken(await rows(
                    """
                    SELECT \(unescaped: Self.sessionColumnsOfS), s.current_hash, s.rotated_at, false
                    FROM token_refresh_token r JOIN token_session s ON s.id = r.session_id
                    WHERE r.hash = \(hash)
                    FOR UPDATE OF s
                    """, on: connection))
            else { return .invalid }
            var session = found.session
            switch Self.decide(found, hash: hash, successorHash: successorHash, now: now, grace: grace, idleTimeout: idleTimeout) {
            case .revoked: return .revoked(session)
            case .expired: return .expired(session)
            case .graceReplay: return .graceReplay(session)
            case .rotate:
                let at = Self.ms(now)
                try await rows(
                    """
                    WITH rotated AS (
                        UPDATE token_session SET current_hash = \(successorHash), rotated_at = \(at), last_used_at = \(at)
                        WHERE id = \(session.id) RETURNING id
                    )
                    INSERT INTO token_refresh_token (hash, session_id, created_at) SELECT \(successorHash), id, \(at) FROM rotated
                    """, on: connection)
                session.lastUsedAt = now
                return .rotated(session)
            case .reuse:
                let reason = RefreshRotation.reuseReason
                session.revokedAt = now
                session.revokeReason = reason
                let event = RevocationAudit.event([session], reason: reason, at: now, all: false)
                _ = try await revokeOne(id: session.id, reason: reason, at: now, audit: event, on: connection)
                return .reused(session)
            }
        }
    }

    /// A token's session as a rotation read it (and locked it), and whether that statement rotated.
    struct LockedToken {
        var session: StoredSession
        var currentHash: Data?
        var rotatedAt: Date?
        var rotated: Bool
    }

    static func lockedToken(_ rows: [PostgresRow]) throws -> LockedToken? {
        for row in rows {
            let (id, user, created, auth, amr, agent, ip, used, expires, revoked, reason, current, rotatedAt, rotated) = try row.decode(
                (String, String, Int64, Int64, String, String, String, Int64, Int64, Int64?, String, Data?, Int64?, Bool).self)
            return LockedToken(
                session: session((id, user, created, auth, amr, agent, ip, used, expires, revoked, reason)), currentHash: current,
                rotatedAt: rotatedAt.map(Date.init(millisecondsSince1970:)), rotated: rotated)
        }
        return nil
    }

    /// The core's decision (`RefreshRotation`) on the session a rotation found (not rotated yet).
    static func decide(
        _ found: LockedToken, hash: Data, successorHash: Data, now: Date, grace: TimeInterval, idleTimeout: TimeInterval
    ) -> RefreshRotation.Decision {
        let session = found.session
        let state = RefreshRotation.State(
            revoked: session.revokedAt != nil, expiresAt: session.expiresAt, lastUsedAt: session.lastUsedAt,
            currentHash: found.currentHash, rotatedAt: found.rotatedAt)
        return RefreshRotation.decide(state, presented: hash, successor: successorHash, now: now, grace: grace, idleTimeout: idleTimeout)
    }
}
