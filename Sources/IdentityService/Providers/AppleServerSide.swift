import Crypto
import Foundation
import IdentityPorts
import GatehouseSupport
import IdentityCore
import Logging
import ProviderTokens

/// Sign in with Apple's server side (issue 20 §4): Apple's token endpoint (the authorization
/// code exchanged for a refresh token, kept sealed; revoked when the account is deleted or the
/// identity unlinked, as the App Store requires) and its server-to-server notifications.
public struct AppleServerSide: Sendable {
    /// Apple's token and revocation endpoints, with the client secret Gatehouse signs.
    public let client: AppleTokenClient
    /// Seals the refresh tokens at rest (AES-GCM, 256-bit).
    let sealingKey: SymmetricKey

    /// The server side over `client`, sealing with `sealingKey`.
    public init(client: AppleTokenClient, sealingKey: SymmetricKey) {
        self.client = client
        self.sealingKey = sealingKey
    }

    /// `token` sealed for the row it is stored in (`associatedData`).
    func seal(_ token: String, associatedData: String) throws -> Data {
        do {
            guard let combined = try AES.GCM.seal(Data(token.utf8), using: sealingKey, authenticating: Data(associatedData.utf8)).combined
            else { throw IdentityError.storage(cause: "AES-GCM gave no combined box") }
            return combined
        } catch let error as IdentityError {
            throw error
        } catch {
            throw IdentityError.storage(cause: "sealing an Apple token failed")
        }
    }

    /// The token sealed by `seal`; nil when it does not open with this key (another key, or altered).
    func open(_ sealed: Data, associatedData: String) -> String? {
        guard let box = try? AES.GCM.SealedBox(combined: sealed),
            let plain = try? AES.GCM.open(box, using: sealingKey, authenticating: Data(associatedData.utf8))
        else { return nil }
        return String(decoding: plain, as: UTF8.self)
    }
}

/// Works the queue of Apple tokens to revoke (`apple_revocations`): each due one is revoked at
/// Apple; a failure is tried again later (30 s, doubling, at most an hour apart, on the
/// injected clock), and dropped with an error in the log after `maxAttempts`. A deletion or an
/// unlink never waits for Apple: it only queued the token, in its own transaction.
public struct AppleRevocationWorker: Sendable {
    let store: any IdentityStorage
    let apple: AppleServerSide
    let clock: WallClock
    let logger: Logger
    /// How often the queue is looked at.
    public var pollInterval: Duration = .seconds(1)
    /// Attempts before a revocation is given up.
    public var maxAttempts = 40

    /// A worker of `store`'s queue.
    public init(store: any IdentityStorage, apple: AppleServerSide, clock: WallClock, logger: Logger) {
        self.store = store
        self.apple = apple
        self.clock = clock
        self.logger = logger
    }

    /// Runs until cancelled.
    public func run() async {
        while !Task.isCancelled {
            await runOnce()
            try? await Task.sleep(for: pollInterval)
        }
    }

    /// Revokes what is due now; how many were revoked.
    @discardableResult
    public func runOnce() async -> Int {
        let due: [PendingAppleRevocation]
        do { due = try await store.dueAppleRevocations(now: clock.now, limit: 100) } catch {
            logger.warning("apple revocations: the queue could not be read: \(error)")
            return 0
        }
        var revoked = 0
        for item in due {
            guard let token = apple.open(item.sealedToken, associatedData: item.associatedData) else {
                logger.error("apple revocation \(item.id): the token does not open with the configured key; dropped")
                try? await store.finishAppleRevocation(id: item.id)
                continue
            }
            do {
                // Claimed just before the call: a row dropped since it was read (a relink) is not revoked.
                guard try await store.claimAppleRevocation(id: item.id, now: clock.now, until: clock.now + 300) else { continue }
                try await apple.client.revoke(token: token, clientID: item.clientID)
                try await store.finishAppleRevocation(id: item.id)
                revoked += 1
            } catch let error as AppleServerError where error == .invalidGrant {
                // Apple no longer knows the token (revoked already, or expired): nothing left to do.
                try? await store.finishAppleRevocation(id: item.id)
            } catch {
                let attempts = item.attempts + 1
                guard attempts < maxAttempts else {
                    logger.error("apple revocation \(item.id) failed \(attempts) times; given up: \(error)")
                    try? await store.finishAppleRevocation(id: item.id)
                    continue
                }
                let delay = min(3600, 30 * pow(2, Double(min(attempts - 1, 7))))
                logger.notice("apple revocation \(item.id) failed (attempt \(attempts)); trying again in \(Int(delay)) s: \(error)")
                do { try await store.retryAppleRevocation(id: item.id, at: clock.now + delay) } catch {
                    // The row stays due: end this pass rather than try it again at once.
                    logger.warning("apple revocations: the retry of \(item.id) could not be scheduled: \(error)")
                    return revoked
                }
            }
        }
        return revoked
    }
}
