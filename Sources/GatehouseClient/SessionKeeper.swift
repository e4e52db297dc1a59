import Foundation

/// The device's session: what the token store holds, the one refresh in flight, and the
/// listeners of `authState`. Every change of the session goes through here, saved to the store
/// before anyone sees it.
actor SessionKeeper {
    private let store: any TokenStore
    private let transport: Transport
    private let now: @Sendable () -> Date
    private let refreshLeeway: TimeInterval
    private var session: StoredSession?
    private var refreshing: Task<StoredSession, any Error>?
    private var listeners: [UUID: AsyncStream<AuthState>.Continuation] = [:]
    /// How many refreshes this client sent (for tests and diagnostics).
    private(set) var refreshCount = 0
    /// Grows at every sign-in and sign-out (not at a refresh): which session a stream served.
    private(set) var generation = 0

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
        generation += 1
        refreshing = nil
        announce(from: old)
        return new
    }

    /// Records the user as it is now (same session).
    func update(user: User) {
        guard var current = session else { return }
        let old = state
        current.user = user
        try? store.save(current)
        session = current
        announce(from: old)
    }

    /// Forgets the session if it is still the one of `generation` (a stream's, whose session
    /// the server ended; a newer sign-in stays).
    func end(ifGeneration expected: Int) {
        guard generation == expected else { return }
        end()
    }

    /// Forgets the session (the store too, as far as it can).
    func end() {
        let old = state
        generation += 1
        try? store.clear()
        session = nil
        refreshing?.cancel()
        refreshing = nil
        announce(from: old)
    }

    /// An access token valid for at least the leeway, refreshed if needed (one refresh for
    /// every concurrent caller). `force` refreshes unless a refresh newer than `stale` ran.
    func accessToken(force stale: String? = nil) async throws -> String {
        guard let current = session else { throw GatehouseError.notSignedIn }
        if let stale, current.accessToken != stale { return current.accessToken }
        if stale == nil, current.expiresAt.timeIntervalSince(now()) > refreshLeeway { return current.accessToken }
        if let refreshing { return try await refreshing.value.accessToken }
        let task = Task { try await self.refresh(current) }
        refreshing = task
        defer { if refreshing == task { refreshing = nil } }
        return try await task.value.accessToken
    }

    /// Exchanges `old`'s refresh token; the rotated session is saved before it is returned. A
    /// sign-out or a newer sign-in while the refresh was on the wire keeps its own session (the
    /// rotated tokens of the session it replaced are not saved), and a user recorded meanwhile (a
    /// live change) is kept.
    private func refresh(_ old: StoredSession) async throws -> StoredSession {
        refreshCount += 1
        let request = try transport.request("POST", "/v1/sessions/refresh", body: ["refreshToken": old.refreshToken])
        let answer = try await transport.send(request)
        guard answer.status == 200 else {
            let error = Transport.error(of: answer)
            if case .sessionEnded = error, session?.refreshToken == old.refreshToken { end() }
            if case .userDisabled = error, session?.refreshToken == old.refreshToken { end() }
            throw error
        }
        let body = try Transport.decode(SessionOnlyBody.self, answer).session
        guard let current = session else { throw GatehouseError.notSignedIn }
        guard current.refreshToken == old.refreshToken else { return current }
        let new = StoredSession(
            accessToken: body.accessToken, refreshToken: body.refreshToken, expiresAt: now().addingTimeInterval(TimeInterval(body.expiresIn)),
            user: current.user)
        // Saved before anyone gets the new access token: a crash after this keeps the new
        // refresh token, never only the used one.
        try store.save(new)
        session = new
        return new
    }
}
