import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import IdentityCore

// Admin keys (issue 22 §1) as every store makes them: only how a key is stored differs
// (`insertAdminKey`).
extension AdminStore {
    /// Makes a key: a 16-character id and a 256-bit secret, `gha_<id>.<secret>`, of which only
    /// the secret's SHA-256 is stored, with its `admin_key.created` audit event (actor: the
    /// operator) in the same transaction. `invalidArgument` for a name that is empty, over 64
    /// bytes or holds control characters, or no or unknown scopes (`all` stands for every scope).
    /// The running identity service calls it (`identity.createAdminKey`), and so does
    /// `gatehouse admin keys create --data-dir` on the database file itself.
    public func createAdminKey(name typed: String, scopes asked: [String], now: Date) async throws -> CreateAdminKeyResponse {
        let name = typed.trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty, name.utf8.count <= 64, !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw IdentityError.invalidArgument(field: "name", reason: "must be 1 to 64 bytes without control characters")
        }
        let scopes = try AdminKeyHandlers.validScopes(asked)
        var generator = SystemRandomNumberGenerator()
        let id = Base64URL.encode((0..<12).map { _ in UInt8.random(in: 0...255, using: &generator) })
        let secret = IdentityInput.newResetCode()
        let key = AdminKey(id: id, name: name, scopes: scopes, createdAt: now.roundedToMilliseconds)
        var detail = JSONObjectWriter()
        detail.string("keyId", id)
        detail.string("name", name)
        detail.strings("scopes", scopes)
        let event = AuditEvent(
            occurredAt: now, kind: AuditEvent.Kind.adminKeyCreated, actor: AuditEvent.Actor.operator,
            detailJSON: String(decoding: detail.finish(), as: UTF8.self))
        try await AuditScope.$current.withValue(AuditRecorder(event)) {
            try await insertAdminKey(key, secretHash: IdentityInput.resetCodeHash(secret))
        }
        return CreateAdminKeyResponse(key: key, token: "\(AdminKeyHandlers.adminKeyPrefix)\(id).\(secret)")
    }
}
