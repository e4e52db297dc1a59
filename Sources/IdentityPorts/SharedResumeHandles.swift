import Foundation
import GatehouseContracts
import IdentityCore

/// Where resume handles live when several identity instances share a store (issue 24): a handle
/// issued by one instance is taken on another, once. The store keeps, per handle, only the
/// SHA-256 of the handle, whose user and session may take it, its expiry, and the entry sealed
/// with a key derived from the handle itself (AES-GCM; HKDF-SHA256): the database alone cannot
/// read the target's password hash or an Apple refresh token it carries.
public protocol SharedResumeHandles: Sendable {
    /// Stores a sealed entry under `digest` until `expiresAt`.
    func putResumeHandle(digest: Data, anonymousUserID: UserID, sessionID: String, sealed: Data, expiresAt: Date) async throws
    /// Deletes and returns the sealed entry under `digest` if it is unexpired at `now` and was
    /// issued to `anonymousUserID` on `sessionID` (one caller gets it, however many ask at once);
    /// nil otherwise (a handle of another caller stays).
    func takeResumeHandle(digest: Data, anonymousUserID: UserID, sessionID: String, now: Date) async throws -> Data?
    /// Deletes what expired by `now` (handles, and the shared replay guard's records); how many went.
    @discardableResult func purgeExpiredHandles(now: Date) async throws -> Int
}

/// A replay guard shared by several instances (issue 24): the verifier's own guard remembers the
/// tokens this process accepted; this one, the tokens any instance accepted.
public protocol SharedReplayGuard: Sendable {
    /// Records `replayID` until `until`; false when it was recorded already and is still kept at
    /// `now` (a replay). Exactly one of several callers with the same id gets true.
    func acceptProviderToken(_ replayID: String, until: Date, now: Date) async throws -> Bool
}
