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

    /// Whether a refusal of one item ends the whole batch (an outage, storage) rather than that item.
    public static func endsBatch(_ error: IdentityError) -> Bool {
        switch error {
        case .unavailable, .storage: return true
        default: return false
        }
    }
}
