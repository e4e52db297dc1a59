import Foundation
import IdentityPorts
import ProviderTokens
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import Logging
import RPCRouting

/// The identity service, assembled from its configuration: an opened and migrated store, a
/// hashing pool and the handlers. The RPC server (ZeroMQ) serves `router`.
public struct IdentityService: Sendable {
    /// The settings it was started with.
    public let configuration: IdentityConfiguration
    /// The opened and migrated user database.
    public let store: any IdentityStorage
    /// The password-hashing threads.
    public let hashPool: HashPool
    /// The RPC methods.
    public let handlers: IdentityHandlers
    /// Removes inactive anonymous users (`configuration.anonymousRetention`); a role runs its
    /// passes on an interval.
    public let anonymousSweep: AnonymousSweep
    /// Publishes the change log (`user.changed`, `identity.heartbeat`); a role runs it.
    public let changeLog: ChangeLogPublisher
    /// Prunes the change log by `configuration`'s limits; a role runs it at start and every minute.
    public let changeLogPrune: ChangeLogPrune
    /// Revokes queued Apple tokens (Sign in with Apple's server side configured); a role runs it.
    public var appleRevocations: AppleRevocationWorker? = nil

    /// Builds the handlers and workers on `store` (opened and migrated by the composition root),
    /// which read the time from `clock`.
    public static func start(
        configuration: IdentityConfiguration, store: any IdentityStorage, tokens: any RPCCaller, events: any EventSink,
        clock: WallClock = .system, logger: Logger = Logger(label: "gatehouse.identity")
    ) async throws -> IdentityService {
        let pool = HashPool(workers: configuration.hashWorkers, queueLimit: configuration.hashQueueLimit)
        let hasher = PasswordHasher(parameters: configuration.argon2, limits: configuration.verifyLimits, pool: pool)
        let policy = PasswordPolicy(minLength: configuration.minPasswordLength, maxLength: configuration.maxPasswordLength)
        var handlers = IdentityHandlers(
            store: store, hasher: hasher, policy: policy, tokens: tokens, events: events, clock: clock, logger: logger,
            throttle: PasswordAttemptThrottle(settings: configuration.attemptThrottle, clock: clock))
        handlers.defaultSettingsJSON = configuration.defaultSettingsJSON
        handlers.recentLoginWindow = configuration.recentLoginWindow
        handlers.passwordReset = configuration.passwordReset
        handlers.emailFlows = configuration.emailFlows
        handlers.mailTemplates = configuration.mailTemplates
        let sweep = AnonymousSweep(
            store: store, tokens: tokens, events: events, clock: clock, retention: configuration.anonymousRetention, logger: logger)
        handlers.resumeHandles = ResumeHandles(ttl: configuration.migrationResumeTTL)
        var appleRevocations: AppleRevocationWorker?
        if !configuration.providers.isEmpty {
            let logger = Logger(label: "gatehouse.identity.providers")
            let verifier = try IDTokenVerifier(
                providers: configuration.providers, clock: clock, options: configuration.providerOptions, logger: logger)
            handlers.providerTokens = verifier
            if let apple = configuration.providers.first(where: { $0.name == "apple.com" }), let cache = verifier.cache(for: apple.name) {
                handlers.appleNotifications = AppleNotificationVerifier(sharingKeysOf: cache, clock: clock, logger: logger)
                if let server = configuration.appleServer {
                    let secret = try AppleClientSecret(
                        teamID: server.teamID, keyID: server.keyID, clientIDs: apple.clientIDs, privateKeyPEM: server.privateKeyPEM, clock: clock)
                    let client = try AppleTokenClient(
                        clientSecret: secret, tokenURL: server.tokenURL, revokeURL: server.revokeURL,
                        timeout: configuration.providerOptions.cachePolicy.fetchTimeout, allowInsecureLoopback: apple.allowInsecureLoopback,
                        logger: logger)
                    let side = AppleServerSide(client: client, sealingKey: server.sealingKey)
                    handlers.apple = side
                    appleRevocations = AppleRevocationWorker(store: store, apple: side, clock: clock, logger: logger)
                }
            }
        }
        let changeLog = try await ChangeLogPublisher.start(store: store, events: events, logger: logger)
        let prune = ChangeLogPrune(
            store: store, clock: clock, retention: configuration.changeLogRetention, maxPerUser: configuration.changeLogMaxPerUser,
            auditRetention: configuration.auditRetention)
        return IdentityService(
            configuration: configuration, store: store, hashPool: pool, handlers: handlers, anonymousSweep: sweep, changeLog: changeLog,
            changeLogPrune: prune, appleRevocations: appleRevocations)
    }

    /// The router serving every identity method.
    public var router: RPCRouter { handlers.router() }
}
