import Logging
import PostgresNIO
import TokenService
import GatehouseContracts

extension TokenRole {
    static func postgresStore(client: PostgresClient, logger: Logger) throws -> any TokenStorage {
        throw RPCError(.unavailable, "the PostgreSQL token store is not in this build yet")
    }
}
