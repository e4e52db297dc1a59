import Foundation
import GatehouseContracts
import Logging
import Synchronization
import ZeroMQ
import RPCRouting

/// Calls one service run as several instances: one `RPCClient` per instance, calls spread over
/// them in turn, an instance that is down routed around within the call's deadline.
///
/// - Each call goes to the next instance with a connection up (round robin); with none up, it
///   waits for one to connect until its deadline, then fails `unavailable`.
/// - A member's calls fail at once with `unavailable` when its connection drops
///   (`RPCClient.Configuration.failFastOnDisconnect`) instead of waiting for that instance to
///   return.
/// - An idempotent call that fails `unavailable` or `deadline_exceeded` is tried again on the
///   next instance, up to `attempts` tries in all, each with a share of what is left of the
///   deadline. A call that is not idempotent is tried once: after a lost connection it may have
///   run, and only the caller can decide (a refresh presented again within the grace window gets
///   the same successor).
///
/// With one endpoint it is a thin wrapper over that endpoint's `RPCClient`.
public final class BalancedRPCClient: RPCCaller, Sendable {
    /// One client per endpoint, in the configured order.
    public let members: [RPCClient]
    /// Tries of an idempotent call, over the members in turn.
    public let attempts: Int
    let defaultTimeout: Duration
    private let next = Atomic<Int>(0)

    /// Clients of `endpoints` (a comma-separated list is split), each with `configuration` but its
    /// endpoint.
    public init(
        endpoints: [String], configuration: RPCClient.Configuration, context: ZMQContext? = nil,
        logger: Logger = Logger(label: "gatehouse.rpc.client")
    ) throws {
        let list = endpoints.flatMap(Self.split)
        precondition(!list.isEmpty, "a balanced client needs an endpoint")
        var members: [RPCClient] = []
        for endpoint in list {
            var member = configuration
            member.endpoint = endpoint
            if list.count > 1 {
                // The balanced client retries over the instances itself.
                member.failFastOnDisconnect = true
                member.idempotentAttempts = 1
                // An instance that stops answering without closing its connection (its host
                // gone) is dropped after 3 s of silence, and its calls go elsewhere.
                member.heartbeatInterval = 1000
                member.heartbeatTimeout = 3000
            }
            members.append(try RPCClient(configuration: member, context: context, logger: logger))
        }
        self.members = members
        attempts = max(configuration.idempotentAttempts, members.count)
        defaultTimeout = configuration.defaultTimeout
    }

    /// The endpoints of a setting: one, or several separated by commas (blanks ignored).
    public static func split(_ endpoints: String) -> [String] {
        endpoints.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// What to call through: the one member itself when there is one endpoint (the hot paths
    /// keep the single client's call path, one generic hop fewer), else this client.
    public var caller: any RPCCaller { members.count == 1 ? members[0] : self }

    /// The endpoints, in order.
    public var endpoints: [String] { members.map(\.configuration.endpoint) }

    /// Stops every member's I/O thread; calls still waiting fail with `unavailable`.
    public func close() async {
        for member in members { await member.close() }
    }

    /// Calls with a deadline `timeout` (or the default timeout) from now.
    public func call<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, timeout: Duration?) async throws -> Res {
        if members.count == 1 { return try await members[0].call(method, request, timeout: timeout) }
        return try await call(method, request, deadline: .now + (timeout ?? defaultTimeout))
    }

    /// Calls the next instance up; see the type for retries.
    public func call<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, deadline: ContinuousClock.Instant) async throws -> Res {
        if members.count == 1 { return try await members[0].call(method, request, deadline: deadline) }
        let tries = method.idempotent ? attempts : 1
        var attempt = 1
        var tried: Set<Int> = []
        while true {
            guard ContinuousClock.now < deadline else { throw RPCError.deadlinePassed(method.name) }
            guard let index = await pick(avoiding: tried, until: deadline) else {
                throw RPCError(.unavailable, "no instance of \(method.name)'s service is reachable (\(endpoints.joined(separator: ", ")))")
            }
            tried.insert(index)
            if tried.count == members.count { tried = [] }
            // What is left after waiting for an instance, if it had to.
            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero else { throw RPCError.deadlinePassed(method.name) }
            let share = attempt < tries ? remaining / (tries - attempt + 1) : remaining
            do {
                return try await members[index].call(method, request, deadline: .now + share)
            } catch let error as RPCError where attempt < tries && (error.code == .unavailable || error.code == .deadlineExceeded) {
                attempt += 1
            }
        }
    }

    /// The next member in turn with a connection up, not in `avoiding` if possible. With none
    /// up, waits for one (checking every 10 ms) until `deadline`; nil if none came up by then.
    func pick(avoiding: Set<Int>, until deadline: ContinuousClock.Instant) async -> Int? {
        while true {
            if let index = pickConnected(avoiding: avoiding) { return index }
            guard ContinuousClock.now < deadline, !Task.isCancelled else { return nil }
            try? await Task.sleep(for: min(.milliseconds(10), ContinuousClock.now.duration(to: deadline)))
        }
    }

    /// The next member in turn with a connection up, not in `avoiding` if possible; nil if none is up.
    func pickConnected(avoiding: Set<Int>) -> Int? {
        let start = next.wrappingAdd(1, ordering: .relaxed).oldValue
        let count = members.count
        var fallback: Int?
        for offset in 0..<count {
            let candidate = Int(UInt(bitPattern: start &+ offset) % UInt(count))
            guard members[candidate].isConnected else { continue }
            if !avoiding.contains(candidate) { return candidate }
            if fallback == nil { fallback = candidate }
        }
        return fallback
    }
}
