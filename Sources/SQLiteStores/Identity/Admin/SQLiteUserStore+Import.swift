import Foundation
import Mail
import GatehouseSupport
import GatehouseContracts
import IdentityPorts
import GRDB
import IdentityCore



// Bulk import and export (issue 22 §5): one write transaction per batch, a savepoint per item so a
// refused item leaves the others written; export pages in id order.
extension SQLiteUserStore {
    /// Writes `candidates` in one transaction, each in its own savepoint; `update` overwrites a
    /// matched user (by id when the item named one, else by normalized email), otherwise a match
    /// is skipped. One result per candidate, in order. `auditDetail` turns the results into the
    /// detail of the running call's audit event, which commits with the batch.
    public func importUsers(
        _ candidates: [ImportCandidate], update: Bool, now: Date, auditDetail: (@Sendable ([ImportWrite]) -> String)?
    ) async throws -> [ImportWrite] {
        let audit = AuditScope.current
        return try await run { db in
            var results: [ImportWrite] = []
            results.reserveCapacity(candidates.count)
            let byID = try db.cachedStatement(sql: "SELECT id FROM users WHERE id = ?")
            let byEmail = try db.cachedStatement(sql: "SELECT id FROM users WHERE email_normalized = ?")
            let insert = try db.cachedStatement(sql: Self.insertSQL)
            for candidate in candidates {
                do {
                    var written = ImportWrite.failed(.storage(cause: "not written"))
                    try db.inSavepoint {
                        var match: String?
                        if candidate.idGiven { match = try String.fetchOne(byID, arguments: [candidate.record.id.rawValue]) }
                        if match == nil, let email = candidate.record.emailNormalized {
                            match = try String.fetchOne(byEmail, arguments: [email])
                        }
                        switch ImportRules.step(matched: match.map { UserID($0) }, update: update) {
                        case .update(let id):
                            _ = try Self.update(id: id, expectedVersion: nil, now: now, in: db, candidate.apply)
                            try Self.linkIdentities(candidate.identities, to: id, now: now, in: db)
                            written = .updated(id)
                        case .skip(let id):
                            written = .skipped(id)
                        case .insert:
                            try insert.execute(arguments: Self.arguments(candidate.record))
                            try Self.linkIdentities(candidate.identities, to: candidate.record.id, now: now, in: db)
                            written = .created(candidate.record.id)
                        }
                        return .commit
                    }
                    results.append(written)
                } catch {
                    let translated = Self.translate(error)
                    if let identityError = translated as? IdentityError, !ImportRules.endsBatch(identityError) {
                        results.append(.failed(identityError))
                    } else {
                        throw translated
                    }
                }
            }
            if let audit, let auditDetail {
                let detail = auditDetail(results)
                audit.update { $0.detailJSON = detail }
            }
            return results
        }
    }

    /// Links an imported user's identities, each as `ImportRules.linksIdentity` decides.
    static func linkIdentities(_ identities: [LinkedIdentity], to user: UserID, now: Date, in db: Database) throws {
        for identity in identities {
            let holder = try String.fetchOne(
                db.cachedStatement(sql: "SELECT user_id FROM identities WHERE provider = ? AND subject = ?"),
                arguments: [identity.provider, identity.subject]
            ).map { UserID($0) }
            let subjects = try String.fetchAll(
                db.cachedStatement(sql: "SELECT subject FROM identities WHERE provider = ? AND user_id = ?"),
                arguments: [identity.provider, user.rawValue])
            guard try ImportRules.linksIdentity(subject: identity.subject, of: user, holder: holder, subjectsOfProvider: subjects) else { continue }
            try db.cachedStatement(sql: "INSERT INTO identities (provider, subject, user_id, created_at) VALUES (?, ?, ?, ?)")
                .execute(arguments: [identity.provider, identity.subject, user.rawValue, now.millisecondsSince1970])
        }
    }

    /// The identities of `users`, each user's sorted by provider and subject.
    public func identities(of users: [UserID]) async throws -> [UserID: [LinkedIdentity]] {
        guard !users.isEmpty else { return [:] }
        return try await read { db in
            var result: [UserID: [LinkedIdentity]] = [:]
            // At most a page (1,000) of ids: one statement with that many parameters.
            let marks = Array(repeating: "?", count: users.count).joined(separator: ",")
            let rows = try Row.fetchAll(
                db, sql: "SELECT user_id, provider, subject FROM identities WHERE user_id IN (\(marks)) ORDER BY user_id, provider, subject",
                arguments: StatementArguments(users.map(\.rawValue)))
            for row in rows {
                result[UserID(row[0] as String), default: []].append(LinkedIdentity(provider: row[1], subject: row[2]))
            }
            return result
        }
    }

    /// Up to `limit` users with an id after `afterID` ("" from the first), in id order.
    public func users(after afterID: String, limit: Int) async throws -> [UserRecord] {
        let sql = Self.selectByIDSQL.replacingOccurrences(of: "WHERE id = ?", with: "WHERE id > ? ORDER BY id LIMIT ?")
        return try await read { db in
            let statement = try db.cachedStatement(sql: sql)
            return try Row.fetchAll(statement, arguments: [afterID, limit]).map(Self.record)
        }
    }
}
