import Foundation
import TokenPorts
import GatehouseContracts
import GatehouseSupport
import PostgresSupport

extension PostgresTokenStore {
    /// The numbered, forward-only migrations of the token store (tables prefixed `token_`):
    /// SQLite's `SQLiteTokenStore` schema as it stands after its migration 0006 (the same column names), in PostgreSQL's terms,
    /// plus the shared revocation log.
    ///
    /// `ord` columns (identities) keep the insertion order SQLite's `rowid` gives: the tie-break
    /// of the orders by time, and the ranges the sweep deletes sessions by.
    public static let migrator = PostgresMigrator(store: "token", migrations: [
        .init("0001-keys-sessions-refresh-tokens-revocations-audit", [
            "CREATE TABLE token_meta (name TEXT NOT NULL PRIMARY KEY, value BYTEA NOT NULL)",
            """
            CREATE TABLE token_signing_key (
                kid TEXT NOT NULL PRIMARY KEY,
                ord BIGINT GENERATED ALWAYS AS IDENTITY,
                algorithm TEXT NOT NULL CHECK (algorithm IN ('ES256', 'EdDSA', 'RS256')),
                private_key BYTEA NOT NULL,
                encrypted BOOLEAN NOT NULL,
                created_at BIGINT NOT NULL,
                activates_at BIGINT NOT NULL,
                signing_until BIGINT,
                retire_after BIGINT
            )
            """,
            """
            CREATE TABLE token_session (
                id TEXT NOT NULL PRIMARY KEY,
                ord BIGINT GENERATED ALWAYS AS IDENTITY,
                user_id TEXT NOT NULL,
                created_at BIGINT NOT NULL,
                auth_time BIGINT NOT NULL,
                amr TEXT NOT NULL,
                user_agent TEXT NOT NULL,
                ip TEXT NOT NULL,
                last_used_at BIGINT NOT NULL,
                expires_at BIGINT NOT NULL,
                revoked_at BIGINT,
                revoke_reason TEXT NOT NULL DEFAULT '',
                current_hash BYTEA CHECK (current_hash IS NULL OR octet_length(current_hash) = 32),
                rotated_at BIGINT
            )
            """,
            "CREATE UNIQUE INDEX token_session_ord ON token_session(ord)",
            "CREATE INDEX token_session_user_id ON token_session(user_id)",
            // `revokedSessions(since:)` and the snapshot read the recent revocations through
            // this partial index (only revoked sessions are in it).
            "CREATE INDEX token_session_revoked_at ON token_session(revoked_at) WHERE revoked_at IS NOT NULL",
            // Keyed by hash alone, no foreign key (as SQLite's since its migration 0002): a token
            // whose session is gone is invalid anyway, and the sweep deletes old tokens by time.
            """
            CREATE TABLE token_refresh_token (
                hash BYTEA NOT NULL PRIMARY KEY CHECK (octet_length(hash) = 32),
                session_id TEXT NOT NULL,
                created_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX token_refresh_token_created_at ON token_refresh_token(created_at)",
            // One row: the last revocation number drawn (`seq`) and the last audit position
            // (`audit_seq`). Revoking transactions update it, so they serialise on its lock.
            """
            CREATE TABLE token_revocation_counter (
                one BOOLEAN NOT NULL PRIMARY KEY DEFAULT true CHECK (one),
                seq BIGINT NOT NULL CHECK (seq >= 0),
                audit_seq BIGINT NOT NULL CHECK (audit_seq >= 0)
            )
            """,
            "INSERT INTO token_revocation_counter (one, seq, audit_seq) VALUES (true, 0, 0)",
            """
            CREATE TABLE token_revocation_event (
                seq BIGINT NOT NULL PRIMARY KEY,
                session_id TEXT NOT NULL,
                user_id TEXT NOT NULL,
                reason TEXT NOT NULL,
                revoked_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX token_revocation_event_revoked_at ON token_revocation_event(revoked_at)",
            // `AuditLogTable`'s shape and limits (characters where SQLite's length() counts
            // characters, bytes where it casts to BLOB); `seq` comes from the counter row.
            """
            CREATE TABLE token_audit_log (
                seq BIGINT NOT NULL PRIMARY KEY,
                occurred_at BIGINT NOT NULL,
                kind TEXT NOT NULL CHECK (char_length(kind) BETWEEN 1 AND 64),
                user_id TEXT NOT NULL DEFAULT '' CHECK (char_length(user_id) <= 128),
                actor TEXT NOT NULL CHECK (char_length(actor) BETWEEN 1 AND 128),
                reason TEXT NOT NULL DEFAULT '' CHECK (char_length(reason) <= 128),
                email TEXT NOT NULL DEFAULT '' CHECK (octet_length(email) <= 320),
                ip TEXT NOT NULL DEFAULT '' CHECK (char_length(ip) <= 64),
                user_agent TEXT NOT NULL DEFAULT '' CHECK (octet_length(user_agent) <= 512),
                session_id TEXT NOT NULL DEFAULT '' CHECK (char_length(session_id) <= 128),
                detail TEXT NOT NULL DEFAULT '' CHECK (
                    detail = '' OR (octet_length(detail) <= 4096 AND json_typeof(detail::json) IS NOT NULL))
            )
            """,
            "CREATE INDEX token_audit_log_user ON token_audit_log(user_id, seq)",
            "CREATE INDEX token_audit_log_time ON token_audit_log(occurred_at)",
        ]),
    ])

    // MARK: Rows

    /// The session columns, in the order `session(_:)` reads them.
    static let sessionColumns =
        "id, user_id, created_at, auth_time, amr, user_agent, ip, last_used_at, expires_at, revoked_at, revoke_reason"
    /// `sessionColumns` of the session table named `s`.
    static let sessionColumnsOfS = sessionColumns.split(separator: ",").map { "s." + $0.trimmingCharacters(in: .whitespaces) }
        .joined(separator: ", ")

    /// A session row as decoded from `sessionColumns`.
    typealias SessionTuple = (String, String, Int64, Int64, String, String, String, Int64, Int64, Int64?, String)

    static func session(_ t: SessionTuple) -> TokenStoreRow {
        TokenStoreRow(
            id: t.0, userID: t.1, createdAt: Date(millisecondsSince1970: t.2), authTime: Date(millisecondsSince1970: t.3),
            amr: t.4.split(separator: " ").map(String.init), client: .init(userAgent: t.5, ip: t.6),
            lastUsedAt: Date(millisecondsSince1970: t.7), expiresAt: Date(millisecondsSince1970: t.8),
            revokedAt: t.9.map(Date.init(millisecondsSince1970:)), revokeReason: t.10)
    }

    /// Milliseconds since 1970, as stored.
    static func ms(_ date: Date) -> Int64 { date.millisecondsSince1970 }

    /// The whole milliseconds before `date` (rounded down): `date >= m / 1000` holds exactly
    /// when `floorMS(date) >= m`, so a comparison in SQL decides as SQLite's store does in Swift.
    static func floorMS(_ date: Date) -> Int64 {
        clampMS((date.timeIntervalSince1970 * 1000).rounded(.down))
    }

    /// `seconds` in whole milliseconds, rounded up (see `floorMS`), kept far from overflow.
    static func ceilMS(_ seconds: TimeInterval) -> Int64 {
        clampMS((seconds * 1000).rounded(.up))
    }

    /// Milliseconds kept within ±10^15 (31,000 years), so sums of two never overflow a BIGINT.
    static func clampMS(_ ms: Double) -> Int64 {
        guard ms.isFinite else { return ms > 0 ? 1_000_000_000_000_000 : -1_000_000_000_000_000 }
        return Int64(max(-1e15, min(1e15, ms)))
    }
}

/// `StoredSession`, the row type every `TokenStorage` returns.
typealias TokenStoreRow = StoredSession
