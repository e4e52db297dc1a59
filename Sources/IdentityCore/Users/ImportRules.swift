import Foundation

/// What an imported item does to the store (`gatehouse users import`).
public enum ImportStep: Sendable, Equatable {
    /// A new user: the item's record inserted.
    case insert
    /// The matched user overwritten with the item.
    case update(UserID)
    /// The matched user left as it is.
    case skip(UserID)
}

/// The rules of a bulk import, once for both stores: a store reads the user an item matches
/// (by id when the item named one, else by normalized email), asks `step`, and applies it in the
/// item's savepoint.
public enum ImportRules {
    /// An item that matched `matched` (nil: no user) in a batch run with `update` (else `skip`).
    public static func step(matched: UserID?, update: Bool) -> ImportStep {
        guard let matched else { return .insert }
        return update ? .update(matched) : .skip(matched)
    }

    /// Whether an imported user's identity `subject` is linked: `true` to insert it, `false`
    /// when `user` has it already (a re-run); `credentialAlreadyInUse` when `holder`, another user,
    /// has it; `providerAlreadyLinked` when `user` has another identity of the provider
    /// (`subjectsOfProvider`). The store reads `holder` and `subjectsOfProvider` in the item's
    /// savepoint; a refusal fails the item, whose writes roll back.
    public static func linksIdentity(subject: String, of user: UserID, holder: UserID?, subjectsOfProvider: [String]) throws -> Bool {
        if let holder {
            guard holder == user else { throw IdentityError.credentialAlreadyInUse }
            return false
        }
        guard subjectsOfProvider.isEmpty else { throw IdentityError.providerAlreadyLinked }
        return true
    }

    /// Whether a refusal of one item ends the whole batch (an outage, storage) rather than that item.
    public static func endsBatch(_ error: IdentityError) -> Bool {
        switch error {
        case .unavailable, .storage: return true
        default: return false
        }
    }
}
