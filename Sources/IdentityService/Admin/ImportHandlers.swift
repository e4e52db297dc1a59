import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import Logging
import RPCRouting

/// Bulk import and export of users (issue 22 §5; `gatehouse users import|export`). Each item is
/// checked as a sign-up would be before anything is written; a refused item is reported with a
/// stable code and a reason (never its hash) and does not stop the others.
public struct ImportHandlers: IdentityFeature {
    let basics: HandlerBasics
    let store: any AdminStore
    /// What an imported hash may cost to verify.
    let hashLimits: HashVerifyLimits

    /// Registers `identity.importUsers` and `identity.exportUsers`.
    func register(_ router: inout RPCRouter) {
        router.register(IdentityAPI.importUsers) { request, _ in try await importUsers(request) }
        router.register(IdentityAPI.exportUsers) { request, _ in try await exportUsers(request) }
    }

    /// Imports a batch of at most 1,000 users (`identity.importUsers`) in one transaction.
    public func importUsers(_ request: ImportUsersRequest) async throws -> ImportUsersResponse {
        guard request.users.count <= IdentityAPI.maxImportBatch else {
            throw IdentityError.invalidArgument(field: "users", reason: "at most \(IdentityAPI.maxImportBatch) users per call (\(request.users.count))")
        }
        let update: Bool
        switch request.mode {
        case "", "skip": update = false
        case "update": update = true
        default: throw IdentityError.invalidArgument(field: "mode", reason: "must be skip or update")
        }
        let actor = try AdminHandlers.adminActor(request.actor)
        let now = clock.now
        var results = [ImportResult?](repeating: nil, count: request.users.count)
        var candidates: [ImportCandidate] = []
        var positions: [Int] = []
        for (index, item) in request.users.enumerated() {
            switch Self.importCandidate(item, now: now, limits: hashLimits) {
            case .success(let candidate):
                candidates.append(candidate)
                positions.append(index)
            case .failure(let error):
                results[index] = Self.failure(index, error)
            }
        }
        let refused = request.users.count - candidates.count
        let detail = { @Sendable (writes: [ImportWrite]) -> String in
            var counts = (created: 0, updated: 0, skipped: 0, failed: refused)
            for write in writes {
                switch write {
                case .created: counts.created += 1
                case .updated: counts.updated += 1
                case .skipped: counts.skipped += 1
                case .failed: counts.failed += 1
                }
            }
            return #"{"mode":"\#(update ? "update" : "skip")","created":\#(counts.created),"updated":\#(counts.updated),"skipped":\#(counts.skipped),"failed":\#(counts.failed)}"#
        }
        let writes = try await audited(AuditEvent.Kind.usersImported, actor: actor) {
            AuditScope.current?.update { $0.detailJSON = detail([]) }
            return candidates.isEmpty ? [] : try await store.importUsers(candidates, update: update, now: now, auditDetail: detail)
        }
        for (position, write) in zip(positions, writes) {
            let index = Int32(position)
            switch write {
            case .created(let id): results[position] = ImportResult(index: index, outcome: "created", userID: id.rawValue)
            case .updated(let id): results[position] = ImportResult(index: index, outcome: "updated", userID: id.rawValue)
            case .skipped(let id): results[position] = ImportResult(index: index, outcome: "skipped", userID: id.rawValue)
            case .failed(let error): results[position] = Self.failure(position, error)
            }
        }
        // A user an update leaves disabled loses its sessions, as with `setDisabled` (again on a
        // re-run: revoking is idempotent), after the batch committed.
        for (position, write) in zip(positions, writes) {
            if case .updated(let id) = write, request.users[position].disabled { try await revokeSessions(of: id, reason: "user_disabled") }
        }
        let created = writes.filter { if case .created = $0 { true } else { false } }.count
        logger.info("imported a batch of \(request.users.count) users: \(created) created")
        return ImportUsersResponse(results: results.map { $0! })
    }

    /// One page of users in id order (`identity.exportUsers`).
    public func exportUsers(_ request: ExportUsersRequest) async throws -> ExportUsersResponse {
        guard (0...Int32(IdentityAPI.maxImportBatch)).contains(request.pageSize) else {
            throw IdentityError.invalidArgument(field: "pageSize", reason: "must be 1 to \(IdentityAPI.maxImportBatch) (0: \(IdentityAPI.maxImportBatch))")
        }
        let limit = request.pageSize == 0 ? IdentityAPI.maxImportBatch : Int(request.pageSize)
        let records = try await store.users(after: request.afterID, limit: limit)
        let identities = try await store.identities(of: records.map(\.id))
        let users = records.map { record in
            ImportedUser(
                id: record.id.rawValue, email: record.email, emailVerified: record.emailVerified, displayName: record.displayName,
                photoURL: record.photoURL, passwordHash: request.includeHashes ? record.passwordHash : nil, providers: record.linkedProviders,
                customClaimsJSON: record.customClaimsJSON.isEmpty ? nil : record.customClaimsJSON, disabled: record.disabled,
                createdAt: record.createdAt,
                identities: (identities[record.id] ?? []).map { ImportedIdentity(provider: $0.provider, subject: $0.subject) })
        }
        return ExportUsersResponse(users: users, nextAfterID: records.count == limit ? records.last!.id.rawValue : "")
    }

    /// The failed result of item `index`: the error's code and message (never a hash).
    static func failure(_ index: Int, _ error: IdentityError) -> ImportResult {
        let wire = error.rpcError
        return ImportResult(index: Int32(index), outcome: "failed", errorCode: wire.code.rawValue, errorMessage: wire.message)
    }

    /// The checked form of `item`, or the `IdentityError` of its first problem.
    static func importCandidate(_ item: ImportedUser, now: Date, limits: HashVerifyLimits = HashVerifyLimits()) -> Result<ImportCandidate, IdentityError> {
        do {
            return .success(try checkedCandidate(item, now: now, limits: limits))
        } catch let error as IdentityError {
            return .failure(error)
        } catch {
            return .failure(.invalidArgument(field: "user", reason: "\(error)"))
        }
    }

    private static func checkedCandidate(_ item: ImportedUser, now: Date, limits: HashVerifyLimits) throws -> ImportCandidate {
        var id = UserID.random()
        if let given = item.id {
            guard UserID.isWellFormed(given), given.utf8.count >= 22 else {
                throw IdentityError.invalidArgument(field: "id", reason: "an id must be 22 to 64 characters among A-Z a-z 0-9 - _")
            }
            id = UserID(given)
        }
        // Gatehouse signs users in by email (and password, or a provider linked to it): a user
        // without one could never sign in, and would be taken for an anonymous user and swept.
        guard let typed = item.email, !typed.isEmpty else {
            throw IdentityError.invalidArgument(
                field: "email", reason: "a user without an email address cannot sign in to Gatehouse: not imported")
        }
        let email: EmailAddress? = try EmailAddress(typed)
        let displayName = try item.displayName.flatMap { try IdentityInput.validDisplayName($0) }
        let photoURL = try item.photoURL.flatMap { try IdentityInput.validPhotoURL($0) }
        let hash = item.passwordHash.flatMap { $0.isEmpty ? nil : $0 }
        if let hash, let problem = PasswordHashing.importProblem(hash, limits: limits) {
            throw IdentityError.invalidArgument(field: "passwordHash", reason: problem)
        }
        if email == nil, hash != nil {
            throw IdentityError.invalidArgument(field: "email", reason: "a user with a password hash needs an email address")
        }
        let claims = try item.customClaimsJSON.map { try CustomClaims.validated($0) }
        let identities = try validIdentities(item.identities)
        let providers = try validProviders(item.providers + identities.map(\.provider))
        var record = UserRecord(
            id: id, email: email, emailVerified: email != nil && item.emailVerified, displayName: displayName, photoURL: photoURL,
            passwordHash: hash, isAnonymous: email == nil, disabled: item.disabled, customClaimsJSON: claims ?? "",
            createdAt: item.createdAt ?? now, updatedAt: now)
        record.linkedProviders = providers
        let createdAt = item.createdAt.map(\.roundedToMilliseconds)
        let (givesName, givesPhoto) = (item.displayName != nil, item.photoURL != nil)
        // An update (a re-run with --mode update) brings the source's profile in, but never undoes
        // what happened in Gatehouse since: a password the user set or signed in with here (an
        // Argon2id hash, written by sign-in's rehash, a change or a reset) stays; a disabled user
        // stays disabled; a verified address stays verified; linked providers are only added.
        let apply: @Sendable (inout UserRecord) -> Void = { user in
            if let email {
                if user.emailNormalized != email.normalized { user.emailVerified = item.emailVerified }
                user.email = email.typed
                user.emailNormalized = email.normalized
                user.isAnonymous = false
            }
            user.emailVerified = user.emailVerified || item.emailVerified
            if givesName { user.displayName = displayName }
            if givesPhoto { user.photoURL = photoURL }
            if let hash, !(user.passwordHash?.hasPrefix("$argon2id$") ?? false) { user.passwordHash = hash }
            if let claims { user.customClaimsJSON = claims }
            user.linkedProviders = Array(Set(user.linkedProviders).union(providers)).sorted()
            if item.disabled { user.disabled = true }
            if let createdAt { user.createdAt = createdAt }
        }
        return ImportCandidate(record: record, idGiven: item.id != nil, identities: identities, apply: apply)
    }

    /// The identities of an item: each a valid provider id and a subject of 1–255 bytes without
    /// control characters, at most one per provider (a user has one identity of each).
    static func validIdentities(_ identities: [ImportedIdentity]) throws -> [LinkedIdentity] {
        guard identities.count <= 16 else {
            throw IdentityError.invalidArgument(field: "identities", reason: "at most 16 identities per user")
        }
        var seen: Set<String> = []
        return try identities.map { identity in
            _ = try validProviders([identity.provider])
            guard (1...255).contains(identity.subject.utf8.count), !identity.subject.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
            else {
                throw IdentityError.invalidArgument(field: "identities", reason: "a subject is 1 to 255 bytes without control characters")
            }
            guard seen.insert(identity.provider).inserted else {
                throw IdentityError.invalidArgument(field: "identities", reason: "one identity per provider (\(identity.provider) twice)")
            }
            return LinkedIdentity(provider: identity.provider, subject: identity.subject)
        }
    }

    /// Linked provider ids: 1–64 printable ASCII characters without commas, not `password`;
    /// sorted, each once.
    static func validProviders(_ providers: [String]) throws -> [String] {
        for provider in providers {
            guard !provider.isEmpty, provider.utf8.count <= 64, provider != "password",
                provider.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ",") })
            else {
                throw IdentityError.invalidArgument(field: "providers", reason: "a provider id is 1 to 64 printable ASCII characters without commas, not password")
            }
        }
        return Array(Set(providers)).sorted()
    }
}
