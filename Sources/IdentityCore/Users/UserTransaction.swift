import Foundation

/// A provider identity (`provider`, `subject`) linked to a user.
public struct LinkedIdentity: Sendable, Hashable {
    /// `apple.com`, `google.com` or `oidc.<name>`.
    public var provider: String
    /// The provider's id of the person.
    public var subject: String

    /// The identity `subject` of `provider`.
    public init(provider: String, subject: String) {
        self.provider = provider
        self.subject = subject
    }
}

/// What a decision about one user reads: the user's row and its identities, read inside the
/// store's transaction under the row's lock (`UserTransactions.transact`).
public struct UserState: Sendable, Equatable {
    /// The row as stored.
    public var user: UserRecord
    /// Its provider identities.
    public var identities: [LinkedIdentity]

    /// The state of `user` with `identities`.
    public init(user: UserRecord, identities: [LinkedIdentity]) {
        self.user = user
        self.identities = identities
    }
}

/// What a decision about one user has the store write, in the transaction it read the
/// `UserState` in. A store applies the parts that are set in this order, and nothing else:
/// 1. `unlinkProvider`: deletes the user's identities of that provider;
/// 2. `linkIdentity`: inserts it for the user (`credentialAlreadyInUse` when anyone has it);
/// 3. `user`: writes the row as it is here, its `version` moved by one and `updatedAt` now.
public struct UserWrites: Sendable, Equatable {
    /// The provider whose identities of the user go.
    public var unlinkProvider: String?
    /// The identity linked to the user.
    public var linkIdentity: LinkedIdentity?
    /// The row as it becomes (id, version and `updatedAt` are the store's).
    public var user: UserRecord?

    /// Writes these parts.
    public init(unlinkProvider: String? = nil, linkIdentity: LinkedIdentity? = nil, user: UserRecord? = nil) {
        self.unlinkProvider = unlinkProvider
        self.linkIdentity = linkIdentity
        self.user = user
    }
}

/// Linking and unlinking a provider identity (seed 002): which refusal, or what to write.
public enum ProviderLinkRules {
    /// Links `identity` to the user and applies `change` to its row, whose `linkedProviders` then
    /// lists the provider. `credentialAlreadyInUse` when the user has this identity already (a
    /// racing sign-in linked it), `providerAlreadyLinked` when it has another of the provider.
    /// Another user's identity is refused when the store inserts it (`credentialAlreadyInUse`).
    public static func link(
        _ state: UserState, _ identity: LinkedIdentity, change: (inout UserRecord) throws -> Void
    ) throws -> UserWrites {
        if state.identities.contains(identity) { throw IdentityError.credentialAlreadyInUse }
        if state.identities.contains(where: { $0.provider == identity.provider }) { throw IdentityError.providerAlreadyLinked }
        var user = state.user
        try change(&user)
        user.linkedProviders = providers(of: state.identities + [identity])
        return UserWrites(linkIdentity: identity, user: user)
    }

    /// Removes the user's identities of `provider`. `providerNotLinked` when it has none;
    /// `lastSignInMethod` when the user would be left with no way to sign in (no password and
    /// no other provider).
    public static func unlink(_ state: UserState, provider: String) throws -> UserWrites {
        guard state.identities.contains(where: { $0.provider == provider }) else { throw IdentityError.providerNotLinked }
        let remaining = state.identities.filter { $0.provider != provider }
        guard state.user.passwordHash != nil || !remaining.isEmpty else { throw IdentityError.lastSignInMethod }
        var user = state.user
        user.linkedProviders = providers(of: remaining)
        return UserWrites(unlinkProvider: provider, user: user)
    }

    /// The providers of `identities`, each once, in byte order (as both stores list them).
    public static func providers(of identities: [LinkedIdentity]) -> [String] {
        Set(identities.map(\.provider)).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }
}
