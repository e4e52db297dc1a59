import Foundation
import PostgresNIO

// The two statements of every refresh, as prepared statements: each connection parses and plans
// them once (postgres-nio prepares a statement on a connection at its first use there), where a
// plain query is parsed and planned at every execution.
extension PostgresTokenStore {
    /// The session of a refresh token (`session(forRefreshHash:)`): one indexed look-up.
    struct SessionByRefreshHash: PostgresPreparedStatement {
        static let name = "gatehouse_token_session_by_refresh_hash_v1"
        static let sql = """
            SELECT \(PostgresTokenStore.sessionColumnsOfS)
            FROM token_refresh_token r JOIN token_session s ON s.id = r.session_id WHERE r.hash = $1
            """
        typealias Row = PostgresRow
        let hash: Data

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 1)
            try bindings.append(hash)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
    }

    /// The rotation of a current token (`rotate`): the session row locked, rotated if the token
    /// is current and the session live, the successor stored; returns the row as locked and
    /// whether it rotated. $1 the token's hash, $2 the successor's, $3 now in ms, $4 now rounded
    /// down, $5 the idle timeout rounded up (see `floorMS`).
    struct RotateCurrent: PostgresPreparedStatement {
        static let name = "gatehouse_token_rotate_current_v1"
        static let sql = """
            WITH found AS (
                SELECT \(PostgresTokenStore.sessionColumnsOfS), s.current_hash, s.rotated_at
                FROM token_refresh_token r JOIN token_session s ON s.id = r.session_id
                WHERE r.hash = $1
                FOR UPDATE OF s
            ), rotated AS (
                UPDATE token_session t SET current_hash = $2, rotated_at = $3, last_used_at = $3
                FROM found f
                WHERE t.id = f.id AND f.current_hash = $1 AND f.revoked_at IS NULL
                    AND $4 < f.expires_at AND $4 < f.last_used_at + $5
                RETURNING t.id
            ), successor AS (
                INSERT INTO token_refresh_token (hash, session_id, created_at) SELECT $2, id, $3 FROM rotated
            )
            SELECT f.*, EXISTS (SELECT 1 FROM rotated) FROM found f
            """
        typealias Row = PostgresRow
        let hash: Data
        let successorHash: Data
        let at: Int64
        let floorNow: Int64
        let idle: Int64

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 5)
            try bindings.append(hash)
            try bindings.append(successorHash)
            bindings.append(at)
            bindings.append(floorNow)
            bindings.append(idle)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
    }

    /// Runs `statement` on `connection` to its end and returns its rows (see `rows`).
    func prepared<Statement: PostgresPreparedStatement>(
        _ statement: Statement, on connection: PostgresConnection, file: String = #fileID, line: Int = #line
    ) async throws -> [PostgresRow] where Statement.Row == PostgresRow {
        var rows: [PostgresRow] = []
        for try await row in try await connection.execute(statement, logger: queryLogger, file: file, line: line) { rows.append(row) }
        return rows
    }
}
