import Foundation
import IdentityCore
import PostgresNIO

// The identity service's point reads (`GET /v1/me`, the claims of every refresh, the look-up of
// every sign-in) as prepared statements: each connection parses and plans them once, where a
// plain query is parsed and planned at every execution (as the token store's refresh statements).
extension PostgresUserStore {
    /// The user with this id.
    struct UserByID: PostgresPreparedStatement {
        static let name = "gatehouse_identity_user_by_id_v1"
        static let sql = "SELECT \(PostgresUserStore.columns) FROM users WHERE id = $1"
        typealias Row = PostgresRow
        let id: String

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 1)
            bindings.append(id)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
    }

    /// The user with this normalized email.
    struct UserByEmail: PostgresPreparedStatement {
        static let name = "gatehouse_identity_user_by_email_v1"
        static let sql = "SELECT \(PostgresUserStore.columns) FROM users WHERE email_normalized = $1"
        typealias Row = PostgresRow
        let normalizedEmail: String

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 1)
            bindings.append(normalizedEmail)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
    }

    /// The first row of `statement`'s answer as a user, read to the end of the answer.
    static func firstUser<Statement: PostgresPreparedStatement>(
        _ statement: Statement, on connection: PostgresConnection, logger: Logger
    ) async throws -> UserRecord? where Statement.Row == PostgresRow {
        var found: UserRecord?
        for try await row in try await connection.execute(statement, logger: logger) where found == nil { found = try record(row) }
        return found
    }
}
