import Foundation
import Synchronization

extension Run {
    // MARK: Virtual users

    struct VirtualUser {
        var index: Int
        /// The user's own session (me, refresh, mixed); nil when the session must be re-established.
        var session: SetupUser?
        var sessionBroken = false
        /// When the session's access token was issued (at the latest).
        var sessionObtained: ContinuousClock.Instant
        var generator = SystemRandomNumberGenerator()

        /// True when the access token is within its last 20% (at most 30 s) of life.
        func accessTokenDue(now: ContinuousClock.Instant) -> Bool {
            guard let lifetime = session?.session.expiresIn, lifetime > 0 else { return false }
            return seconds(now - sessionObtained) >= lifetime - min(30, lifetime * 0.2)
        }
    }

    func virtualUser(_ initial: VirtualUser, measureStart: ContinuousClock.Instant, measureEnd: ContinuousClock.Instant,
                     clock: ContinuousClock) async {
        var user = initial
        let operations = operationsUsed
        while !Task.isCancelled {
            if clock.now >= measureEnd { return }
            let operation: Operation
            if config.scenario == .mixed {
                operation = config.mix.pick(Int.random(in: 0..<config.mix.total, using: &user.generator))
            } else {
                operation = operations[0]
            }
            if operation == .me, user.accessTokenDue(now: clock.now) {
                // Long runs outlive access tokens: renew before they expire (not recorded).
                await renewSession(&user)
            }
            if operation == .refresh || operation == .me, user.sessionBroken {
                // Never present a refresh token whose fate is unknown: sign in again (not recorded).
                await recoverSession(&user)
                if user.sessionBroken {
                    try? await Task.sleep(for: .milliseconds(50))
                    continue
                }
            }
            let start = clock.now
            if start >= measureEnd { return }
            let measured = start >= measureStart
            if measured, let limit = config.maxRequests {
                // Claim a ticket for the request bound.
                let ticket = tickets.wrappingAdd(1, ordering: .relaxed).oldValue
                if ticket >= limit {
                    hitRequestBound.store(true, ordering: .relaxed)
                    return
                }
            }
            let outcome = await perform(operation, user: &user)
            let end = clock.now
            if measured {
                record(operation, outcome, micros: micros(end - start))
                lastMeasuredEnd.withLock { last in
                    if last.map({ $0 < end }) ?? true { last = end }
                }
            }
            if config.busyBackoff > 0, case .unexpectedStatus(let status) = outcome, status == 503 || status == 429 {
                // Back off like a client honouring Retry-After (not measured).
                try? await Task.sleep(for: .milliseconds(Int(config.busyBackoff * 1000)))
            }
        }
    }

    func recoverSession(_ user: inout VirtualUser) async {
        let made = pool.withLock { $0 }
        guard !made.isEmpty else { return }
        let email = made[user.index % made.count].email
        recoveries.wrappingAdd(1, ordering: .relaxed)
        let sent = ContinuousClock.now
        let step = await signIn(email: email)
        if let value = step.value {
            user.session = value
            user.sessionBroken = false
            user.sessionObtained = sent
        }
    }

    /// Rotates the user's session outside the measurements, to get a fresh access token.
    func renewSession(_ user: inout VirtualUser) async {
        guard !user.sessionBroken, let session = user.session else { return }
        renewals.wrappingAdd(1, ordering: .relaxed)
        _ = await rotate(session, of: &user)
    }

    /// Refreshes `session`, the user's: the user takes the new tokens, or, when the refresh failed
    /// or its outcome is unknown, is marked broken (the presented token may be spent: never send
    /// it again).
    func rotate(_ session: SetupUser, of user: inout VirtualUser) async -> Step<SessionTokens> {
        let sent = ContinuousClock.now
        let step = await refresh(session.session.refreshToken)
        if let rotated = step.value {
            user.session?.session = rotated
            user.sessionObtained = sent
        } else {
            user.sessionBroken = true
        }
        return step
    }

    /// Sends one request of `operation` and checks it. Updates the user's session on refresh.
    func perform(_ operation: Operation, user: inout VirtualUser) async -> RequestOutcome {
        switch operation {
            case .signup:
                let n = serial.wrappingAdd(1, ordering: .relaxed).oldValue
                return await signUp(email: "load-\(config.runID)-\(n)@example.com").recorded(self, .signup)
            case .signin:
                let made = pool.withLock { $0 }
                let n = signinCursor.wrappingAdd(1, ordering: .relaxed).oldValue
                return await signIn(email: made[n % made.count].email).recorded(self, .signin)
            case .me:
                guard let session = user.session else { return .transport(kind: "no_session", detail: "no access token") }
                return await me(accessToken: session.session.accessToken, expectedID: session.id).recorded(self, .me)
            case .refresh:
                guard let session = user.session else { return .transport(kind: "no_session", detail: "no session") }
                return await rotate(session, of: &user).recorded(self, .refresh)
            case .rawGet:
                return await rawGet().recorded(self, .rawGet)
            case .provider:
                let n = signinCursor.wrappingAdd(1, ordering: .relaxed).oldValue
                return await providerSignIn(subject: n % config.effectiveSetupUsers).recorded(self, .provider)
            }
    }
}
