import Foundation
import IdentityCore

/// An anonymous user the sweep may remove: its id and its activity as the store knows it.
public struct AnonymousCandidate: Sendable, Hashable {
    /// The anonymous user.
    public var id: UserID
    /// The latest of its creation, its last sign-in and the session activity recorded for it
    /// (`AnonymousSweepStore.recordSessionActivity`).
    public var lastActivity: Date
    /// A candidate `id`, last active at `lastActivity`.
    public init(id: UserID, lastActivity: Date) {
        self.id = id
        self.lastActivity = lastActivity
    }
}

/// What the sweep of inactive anonymous users needs of a store, beside `UserStore`.
///
/// A user's activity is the latest of `createdAt`, `lastSignInAt` and the last use of any of its
/// sessions. Only the token service knows the last; the sweep asks it (`token.lastActivity`) for
/// the candidates of a batch and records what it learns here, so a user found active leaves the
/// candidates until the retention has passed again, and the refresh path writes nothing.
public protocol AnonymousSweepStore: UserStore {
    /// Anonymous users whose known activity is before `cutoff`, least recently active first, at
    /// most `limit` (read through an index on the activity of anonymous users).
    func anonymousCandidates(inactiveBefore cutoff: Date, limit: Int) async throws -> [AnonymousCandidate]

    /// Records session activity learned from the token service: each user's stored session
    /// activity becomes the later of the stored one and the given instant. Unknown users are
    /// skipped; `version` and `updatedAt` do not change.
    func recordSessionActivity(_ activity: [UserID: Date]) async throws

    /// Deletes the user (and its linked identities) only if it is still anonymous and its known
    /// activity is still before `cutoff`, in one transaction; whether it did. A user upgraded,
    /// signed in or found active since it was listed is left alone.
    func deleteAnonymous(id: UserID, inactiveBefore cutoff: Date) async throws -> Bool
}
