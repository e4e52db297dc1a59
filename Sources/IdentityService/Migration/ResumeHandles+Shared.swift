import Crypto
import Foundation
import IdentityPorts
import GatehouseSupport
import IdentityCore


/// What a shared store keeps of an entry (sealed).
struct SealedResumeEntry: Codable {
    var anonymousUserID: String
    var sessionID: String
    var targetUserID: String
    var targetPasswordHash: String?
    var provider: String?
    var subject: String?
    var appleRefreshToken: String?
    var appleClientID: String?
    var expiresAt: Double
}

extension ResumeHandles {
    /// Issues a handle: in `shared` when set (several instances), else in this process's memory.
    public func issue(
        anonymousUserID: UserID, sessionID: String, target: UserRecord, providerIdentity: ProviderIdentity? = nil, now: Date,
        shared: (any SharedResumeHandles)?
    ) async throws -> String {
        guard let shared else {
            return issue(anonymousUserID: anonymousUserID, sessionID: sessionID, target: target, providerIdentity: providerIdentity, now: now)
        }
        var generator = SystemRandomNumberGenerator()
        let handle = Base64URL.encode(Data((0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }))
        let entry = SealedResumeEntry(
            anonymousUserID: anonymousUserID.rawValue, sessionID: sessionID, targetUserID: target.id.rawValue,
            targetPasswordHash: target.passwordHash, provider: providerIdentity?.provider, subject: providerIdentity?.subject,
            appleRefreshToken: providerIdentity?.appleRefreshToken, appleClientID: providerIdentity?.appleClientID,
            expiresAt: (now + ttl).timeIntervalSince1970)
        let sealed = try AES.GCM.seal(try JSONEncoder().encode(entry), using: Self.sealingKey(handle)).combined ?? Data()
        try await shared.putResumeHandle(
            digest: Self.sharedDigest(handle), anonymousUserID: anonymousUserID, sessionID: sessionID, sealed: sealed, expiresAt: now + ttl)
        return handle
    }

    /// Takes a handle (single use; see `take`): from `shared` when set, else from memory.
    public func take(
        _ handle: String, userID: UserID, sessionID: String, now: Date, shared: (any SharedResumeHandles)?
    ) async throws -> Entry? {
        guard let shared else { return take(handle, userID: userID, sessionID: sessionID, now: now) }
        guard !handle.isEmpty, handle.utf8.count <= 128,
            let sealed = try await shared.takeResumeHandle(
                digest: Self.sharedDigest(handle), anonymousUserID: userID, sessionID: sessionID, now: now),
            let box = try? AES.GCM.SealedBox(combined: sealed),
            let plain = try? AES.GCM.open(box, using: Self.sealingKey(handle)),
            let stored = try? JSONDecoder().decode(SealedResumeEntry.self, from: plain),
            stored.anonymousUserID == userID.rawValue, stored.sessionID == sessionID
        else { return nil }
        var identity: ProviderIdentity?
        if let provider = stored.provider, let subject = stored.subject {
            identity = ProviderIdentity(provider: provider, subject: subject)
            identity?.appleRefreshToken = stored.appleRefreshToken
            identity?.appleClientID = stored.appleClientID
        }
        return Entry(
            anonymousUserID: UserID(rawValue: stored.anonymousUserID), sessionID: stored.sessionID,
            targetUserID: UserID(rawValue: stored.targetUserID), targetPasswordHash: stored.targetPasswordHash,
            providerIdentity: identity, expiresAt: Date(timeIntervalSince1970: stored.expiresAt))
    }

    /// The key a handle's entry is sealed with: derived from the handle, which only its holder has.
    static func sealingKey(_ handle: String) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: Data(handle.utf8)), info: Data("gatehouse.resume-handle.v1".utf8), outputByteCount: 32)
    }

    /// The SHA-256 of the handle: the store's key for it.
    static func sharedDigest(_ handle: String) -> Data { Data(SHA256.hash(data: Data(handle.utf8))) }
}
