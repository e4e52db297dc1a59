import Foundation

/// What a mail-code decision (`MailCodeRules`) has a store write, in its transaction, for one
/// user. A store applies the parts that are set in this order, each as one statement (or one per
/// purpose), and nothing else:
/// 1. `purgeResetsCreatedBefore`: deletes the user's reset rows made before it;
/// 2. `reserveAddress`: the address a new revert code reserves (a store whose reservation check
///    runs under a lock takes that lock here, before the user leaves the address);
/// 3. `newAddress`: the user's address and normalized address become it, verified; version + 1;
/// 4. `useResetCode`, `useEmailAction`: marks that row used;
/// 5. `voidResets`, `voidEmailActions`, `voidRevertCodesAfter`: marks the user's unused reset
///    codes, its unused codes of each purpose, its unused revert codes with a greater id, used;
/// 6. `password`: see `PasswordWrite`;
/// 7. `newResetCode`, `newEmailAction`: inserts the code, made now;
/// 8. `mail`: queues it in the outbox.
public struct MailCodeWrites<Mail: Sendable>: Sendable {
    /// The user every part is about.
    public var userID: UserID
    /// Deletes the user's reset rows made before this (milliseconds since 1970).
    public var purgeResetsCreatedBefore: Int64?
    /// The normalized address a new revert code reserves for the user.
    public var reserveAddress: String?
    /// The user's new address (verified).
    public var newAddress: AddressWrite?
    /// The id of the reset row to mark used.
    public var useResetCode: Int64?
    /// The id of the email action row to mark used.
    public var useEmailAction: Int64?
    /// Whether the user's unused reset codes are voided.
    public var voidResets = false
    /// The purposes whose unused codes of the user are voided, in this order.
    public var voidEmailActions: [EmailActionPurpose] = []
    /// Voids the user's unused revert codes with an id greater than this (made after it).
    public var voidRevertCodesAfter: Int64?
    /// What happens to the user's password.
    public var password: PasswordWrite?
    /// A reset code to store.
    public var newResetCode: NewResetCode?
    /// An email action code to store.
    public var newEmailAction: NewEmailAction?
    /// The mail to queue.
    public var mail: Mail?

    /// Nothing to write yet for `userID`.
    public init(userID: UserID) {
        self.userID = userID
    }
}

extension MailCodeWrites: Equatable where Mail: Equatable {}

/// A user's new address, as `MailCodeWrites.newAddress` writes it.
public struct AddressWrite: Sendable, Equatable {
    /// The address as typed.
    public var email: String
    /// The address normalized.
    public var emailNormalized: String

    /// The address `email` (`emailNormalized`).
    public init(email: String, emailNormalized: String) {
        self.email = email
        self.emailNormalized = emailNormalized
    }
}

/// What `MailCodeWrites.password` does to the user's row.
public enum PasswordWrite: Sendable, Equatable {
    /// The password hash becomes this and the address is marked verified (the code came to it);
    /// version + 1, `updatedAt` now.
    case reset(hash: String)
    /// The password hash is cleared (version and `updatedAt` unchanged: the same transaction's
    /// address write moved them).
    case clear
}
