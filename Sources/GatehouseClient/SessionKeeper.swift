import Foundation

/// The device's session: what the token store holds, the one refresh in flight, and the
/// listeners of `authState`. Every change of the session goes through here, saved to the store
/// before anyone sees it.
///
/// `generation` grows at every sign-in and sign-out (not at a refresh): a call or a stream that
/// began under one session never ends or overwrites the next one.
actor SessionKeeper {
    private let store: any TokenStore
    private let transport: Transport
    private let now: @Sendable () -> Date
    private let refreshLeeway: TimeInterval
    private var session: StoredSession?
    /// The session in memory is newer than the store's (a save failed): saved before any use.
    private var unsaved = false
    private var refreshing: Task<Void, any Error>?
    private var listeners: [UUID: AsyncStream<AuthState>.Continuation] = [:]
    /// How many refreshes this client sent (for tests and diagnostics).
    private(set) var refreshCount = 0
    /// Grows at every sign-in and sign-out (not at a refresh).
    private(set) var generation = 0
    /// Why the server ended the last session, until the next sign-in: what a call made after
    /// it throws instead of `notSignedIn`.
    private var endedBecause: GatehouseError?

    init(store: any TokenStore, transport: Transport, now: @escaping @Sendable () -> Date, refreshLeeway: TimeInterval, restored: StoredSession?) {
        self.store = store
        self.transport = transport
        self.now = now
        self.refreshLeeway = refreshLeeway
        self.session = restored
    }

    var current: StoredSession? { session }

    var state: AuthState { AuthState(session?.user) }

    /// A stream of the state, starting with the current one.
    func stateStream() -> AsyncStream<AuthState> {
        let (stream, continuation) = AsyncStream.makeStream(of: AuthState.self, bufferingPolicy: .bufferingNewest(8))
        let id = UUID()
        listeners[id] = continuation
        continuation.yield(state)
        continuation.onTermination = { [weak self] _ in
            Task { await self?.removeListener(id) }
        }
        return stream
    }

    private func removeListener(_ id: UUID) { listeners[id] = nil }

    private func announce(from old: AuthState) {
        let new = state
        guard new != old else { return }
        for continuation in listeners.values { continuation.yield(new) }
    }

    /// Adopts a new session from a sign-in: saved first, then announced.
    func adopt(_ body: SessionBody, user: User) throws -> StoredSession {
        let old = state
        let new = StoredSession(
            accessToken: body.accessToken, refreshToken: body.refreshToken, expiresAt: now().addingTimeInterval(TimeInterval(body.expiresIn)),
            user: user)
        try store.save(new)
        session = new
        unsaved = false
        generation += 1
        endedBecause = nil
        refreshing = nil
        announce(from: old)
        return new
    }

    /// Records the user as it is now, if the session is still the one of `generation` (when
    /// given) and belongs to that user.
    func update(user: User, ifGeneration expected: Int? = nil) {
        guard var current = session, expected == nil || expected == generation else { return }
        guard current.user?.id == nil || current.user?.id == user.id else { return }
        let old = state
        current.user = user
        session = current
        if (try? store.save(current)) == nil { unsaved = true }
        announce(from: old)
    }

    /// Forgets the session if it is still the one of `generation` (a call's or a stream's,
    /// whose session the server ended, `because` says how; a newer sign-in stays).
    func end(ifGeneration expected: Int, because reason: GatehouseError? = nil) {
        guard generation == expected else { return }
        end(because: reason)
    }

    /// Forgets the session (the store too, as far as it can); `because`: the server ended it so.
    func end(because reason: GatehouseError? = nil) {
        endedBecause = reason
        let old = state
        generation += 1
        try? store.clear()
        session = nil
        unsaved = false
        refreshing?.cancel()
        refreshing = nil
        announce(from: old)
    }

    /// Ends the session and returns it (for a sign-out that then tells the server).
    func take() -> StoredSession? {
        let taken = session
        if taken != nil { end() }
        return taken
    }

    /// An access token valid for at least the leeway, and the generation of its session.
    /// Refreshed if needed: one refresh for every concurrent caller. With `force`, refreshed
    /// unless the session already has a token other than `force` (a refresh ran meanwhile).
    func credentials(force stale: String? = nil) async throws -> (token: String, generation: Int) {
        guard let current = session else { throw endedBecause ?? GatehouseError.notSignedIn }
        if unsaved {
            try store.save(current)
            unsaved = false
        }
        if let stale, current.accessToken != stale { return (current.accessToken, generation) }
        if stale == nil, current.expiresAt.timeIntervalSince(now()) > refreshLeeway { return (current.accessToken, generation) }
        do {
            if let refreshing {
                try await refreshing.value
            } else {
                let task = Task { try await self.refresh(current) }
                refreshing = task
                defer { if refreshing == task { refreshing = nil } }
                try await task.value
            }
        } catch let error as GatehouseError where error.endsSession {
            throw error
        } catch {
            // A refresh cut short by a sign-out or a new sign-in says nothing of the session now.
            guard session?.refreshToken == current.refreshToken else {
                guard let now = session else { throw GatehouseError.notSignedIn }
                return (now.accessToken, generation)
            }
            throw error
        }
        // Whatever happened meanwhile (a sign-out, another sign-in), the session as it is now.
        guard let now = session else { throw GatehouseError.notSignedIn }
        return (now.accessToken, generation)
    }

    /// `credentials(force:)`'s token.
    func accessToken(force stale: String? = nil) async throws -> String {
        try await credentials(force: stale).token
    }

    /// Exchanges `old`'s refresh token. The rotated session replaces `old` in memory at once
    /// (the old refresh token is used up) and is saved before anyone gets its access token; a
    /// session that ended or was replaced meanwhile is left alone.
    private func refresh(_ old: StoredSession) async throws {
        refreshCount += 1
        let answer = try await transport.send(transport.request("POST", "/v1/sessions/refresh", body: ["refreshToken": old.refreshToken]))
        let still = session?.refreshToken == old.refreshToken
        guard answer.status == 200 else {
            let error = Transport.error(of: answer)
            if error.endsSession, still { end(because: error) }
            throw error
        }
        guard still else { return }
        let body = try Transport.decode(SessionOnlyBody.self, answer).session
        // The user as it is now: a change that arrived (a stream) while the refresh ran stays.
        let new = StoredSession(
            accessToken: body.accessToken, refreshToken: body.refreshToken, expiresAt: now().addingTimeInterval(TimeInterval(body.expiresIn)),
            user: session?.user ?? old.user)
        session = new
        do {
            try store.save(new)
        } catch {
            // Kept in memory (the old one is spent); saved before the next use, or the call fails.
            unsaved = true
            throw error
        }
    }
}
