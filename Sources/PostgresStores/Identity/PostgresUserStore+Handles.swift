import Crypto
import Foundation
import GatehouseSupport
import IdentityCore
import IdentityPorts
import PostgresNIO
import PostgresSupport
import ProviderTokens

// What one identity instance used to keep in memory, shared so that several instances act as one
// (issue 24): migration resume handles (issued by one instance, taken once on any) and the
// provider ID tokens already accepted (a token replayed on another instance is refused too).
extension PostgresUserStore: SharedResumeHandles, SharedReplayGuard {
    /// Several instances share the handles: the database keeps them.
    public var sharedResumeHandles: (any SharedResumeHandles)? { self }
    /// Several instances share the replay guard: the database keeps it.
    public var sharedReplayGuard: (any SharedReplayGuard)? { self }
    /// Every read is a round trip to the database: none answers on the calling thread.
    public var synchronousReads: (any SynchronousPointReads)? { nil }

    /// Migration 0020: `resume_handles` (a handle's SHA-256, whose it is, the sealed entry, its
    /// expiry) and `provider_token_replays` (an accepted token's key, as SHA-256, and until when).
    static let handleMigrations: [PostgresMigrator.Migration] = [
        .init("0020-shared-handles", [
            """
            CREATE TABLE resume_handles (
                digest BYTEA NOT NULL PRIMARY KEY CHECK (octet_length(digest) = 32),
                anonymous_user_id TEXT NOT NULL CHECK (length(anonymous_user_id) BETWEEN 22 AND 64),
                session_id TEXT NOT NULL CHECK (length(session_id) <= 128),
                sealed BYTEA NOT NULL CHECK (octet_length(sealed) <= 16384),
                expires_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX resume_handles_expiry ON resume_handles(expires_at)",
            """
            CREATE TABLE provider_token_replays (
                digest BYTEA NOT NULL PRIMARY KEY CHECK (octet_length(digest) = 32),
                expires_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX provider_token_replays_expiry ON provider_token_replays(expires_at)",
        ]),
    ]

    /// Stores a resume handle's sealed entry (`SharedResumeHandles`).
    public func putResumeHandle(digest: Data, anonymousUserID: UserID, sessionID: String, sealed: Data, expiresAt: Date) async throws {
        _ = try await run { [queryLogger] connection in
            try await connection.query(
                """
                INSERT INTO resume_handles (digest, anonymous_user_id, session_id, sealed, expires_at)
                VALUES (\(digest), \(anonymousUserID.rawValue), \(sessionID), \(sealed), \(expiresAt.millisecondsSince1970))
                """, logger: queryLogger)
        }
    }

    /// Deletes and returns the handle's sealed entry if it is this caller's and unexpired: one
    /// DELETE, so of several instances taking it at once exactly one gets it.
    public func takeResumeHandle(digest: Data, anonymousUserID: UserID, sessionID: String, now: Date) async throws -> Data? {
        return try await run { [queryLogger] connection in
            let rows = try await connection.query(
                """
                DELETE FROM resume_handles
                WHERE digest = \(digest) AND anonymous_user_id = \(anonymousUserID.rawValue) AND session_id = \(sessionID)
                    AND expires_at > \(now.millisecondsSince1970)
                RETURNING sealed
                """, logger: queryLogger)
            for try await sealed in rows.decode(Data.self) { return sealed }
            return nil
        }
    }

    /// Records an accepted provider token until `until`; false when it is already kept (a replay).
    /// An expired record is taken over. One statement: exactly one of several callers gets true.
    public func acceptProviderToken(_ replayID: String, until: Date, now: Date) async throws -> Bool {
        let digest = Data(SHA256.hash(data: Data(replayID.utf8)))
        return try await run { [queryLogger] connection in
            let rows = try await connection.query(
                """
                INSERT INTO provider_token_replays (digest, expires_at) VALUES (\(digest), \(until.millisecondsSince1970))
                ON CONFLICT (digest) DO UPDATE SET expires_at = EXCLUDED.expires_at
                    WHERE provider_token_replays.expires_at <= \(now.millisecondsSince1970)
                RETURNING expires_at
                """, logger: queryLogger)
            var accepted = false
            for try await _ in rows { accepted = true }
            return accepted
        }
    }

    /// Deletes expired resume handles and replay records; how many went. Run with the other
    /// retention jobs.
    @discardableResult
    public func purgeExpiredHandles(now: Date) async throws -> Int {
        try await run { [queryLogger] connection in
            var count = 0
            for table in ["resume_handles", "provider_token_replays"] {
                let rows = try await connection.query(
                    "DELETE FROM \(unescaped: table) WHERE expires_at <= \(now.millisecondsSince1970) RETURNING 1", logger: queryLogger)
                for try await _ in rows { count += 1 }
            }
            return count
        }
    }

    /// Every stored resume handle row, its columns' bytes run together (tests: what a reader of
    /// the database sees).
    public func rawResumeHandleRows() async throws -> [Data] {
        try await run { [queryLogger] connection in
            var rows: [Data] = []
            let query: PostgresQuery = "SELECT digest, anonymous_user_id, session_id, sealed FROM resume_handles"
            for try await (digest, user, session, sealed) in try await connection.query(query, logger: queryLogger)
                .decode((Data, String, String, Data).self)
            {
                rows.append(digest + Data(user.utf8) + Data(session.utf8) + sealed)
            }
            return rows
        }
    }
}
