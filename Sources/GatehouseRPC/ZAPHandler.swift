import Foundation
import Logging
import Synchronization
import ZeroMQ

/// The ZeroMQ authentication handler (ZAP, RFC 27/ZAP) of one `ZMQContext`: decides which CURVE
/// clients a server socket accepts.
///
/// libzmq asks the handler bound at `inproc://zeromq.zap.01` in the server socket's context
/// about every new connection to a socket that has a ZAP domain. Each CURVE server socket with
/// an allow list registers its own domain here (``register(allowedClientKeys:serverKey:prefix:)``);
/// a client is accepted when its public key is on that domain's list (or is the server's own
/// key, so a process can probe its own service). Everything else is refused with status 400:
/// unknown domains, mechanisms other than CURVE, malformed requests.
///
/// The handler's ROUTER socket is bound when it is created, before any server socket that uses
/// it binds, and lives on its own I/O thread as long as the process (one handler per context).
public final class ZAPHandler: Sendable {
    /// Where libzmq looks for the handler.
    public static let endpoint = "inproc://zeromq.zap.01"

    enum Command: Sendable { case stop }

    struct Domain {
        var allowed: Set<[UInt8]>
        var accepted = 0
        var refused = 0
    }

    struct Registry {
        var domains: [String: Domain] = [:]
        var next = 1
        /// Refusals per client key, for tests and for rate-limited logging.
        var refusedKeys: [[UInt8]: (count: Int, lastLogged: ContinuousClock.Instant?)] = [:]
    }

    private let registry = Mutex(Registry())
    private let io: IOThread<Command>
    let logger: Logger

    private static let handlers = Mutex<[ObjectIdentifier: ZAPHandler]>([:])

    /// The handler of `context`, bound and started on first use.
    public static func handler(for context: ZMQContext, logger: Logger = Logger(label: "gatehouse.zap")) throws -> ZAPHandler {
        try handlers.withLock { handlers in
            if let existing = handlers[ObjectIdentifier(context)] { return existing }
            let handler = try ZAPHandler(context: context, logger: logger)
            // Kept for the life of the process; it also keeps `context` alive, so the identifier
            // is never reused by another context.
            handlers[ObjectIdentifier(context)] = handler
            return handler
        }
    }

    private init(context: ZMQContext, logger: Logger) throws {
        self.logger = logger
        io = try IOThread()
        let socket = try context.socket(.router)
        try socket.set(.linger(0))
        try socket.bind(Self.endpoint)
        let loop = ZAPLoop(handler: self, socket: socket)
        io.start(name: "zap-handler") { loop.run() }
    }

    /// Registers an allow list under a new domain (`prefix/N`) and returns the domain, to set as
    /// the server socket's `ZMQ_ZAP_DOMAIN`. `serverKey` is always allowed too.
    public func register(allowedClientKeys: Set<[UInt8]>, serverKey: [UInt8], prefix: String = "gatehouse") -> String {
        registry.withLock { registry in
            let domain = "\(prefix)/\(registry.next)"
            registry.next += 1
            var allowed = allowedClientKeys
            allowed.insert(serverKey)
            registry.domains[domain] = Domain(allowed: allowed)
            return domain
        }
    }

    /// Forgets a domain (its server socket is closed); later requests for it are refused.
    public func unregister(_ domain: String) {
        _ = registry.withLock { $0.domains.removeValue(forKey: domain) }
    }

    /// Connections accepted and refused so far in `domain`.
    public func counts(domain: String) -> (accepted: Int, refused: Int) {
        registry.withLock { registry in
            guard let entry = registry.domains[domain] else { return (0, 0) }
            return (entry.accepted, entry.refused)
        }
    }

    /// How many times a client with public key `key` was refused (any domain).
    public func refusals(of key: [UInt8]) -> Int {
        registry.withLock { $0.refusedKeys[key]?.count ?? 0 }
    }

    /// Answers one ZAP request (frames after the envelope). Returns the reply frames.
    func answer(_ frames: [[UInt8]]) -> [[UInt8]] {
        let version = Array("1.0".utf8)
        guard frames.count >= 6 else {
            logger.warning("ZAP: refused a malformed request of \(frames.count) frames")
            return [version, frames.count > 1 ? frames[1] : [], Array("400".utf8), Array("malformed request".utf8), [], []]
        }
        let requestID = frames[1]
        func reply(_ status: String, _ text: String, user: String = "") -> [[UInt8]] {
            [version, requestID, Array(status.utf8), Array(text.utf8), Array(user.utf8), []]
        }
        guard frames[0] == version else { return reply("400", "unsupported ZAP version") }
        let domain = String(decoding: frames[2], as: UTF8.self)
        let address = String(decoding: frames[3], as: UTF8.self)
        let mechanism = String(decoding: frames[5], as: UTF8.self)
        // A socket without a domain did not ask for an allow list; libzmq 4.3 still asks the
        // handler about it (ZMQ_ZAP_ENFORCE_DOMAIN is off). Such sockets (plain text, or CURVE
        // accepting any client that knows the server key) keep libzmq's default: accept.
        if domain.isEmpty { return reply("200", "OK") }
        guard mechanism == "CURVE", frames.count >= 7, frames[6].count == 32 else {
            refuse(domain: domain, key: nil, address: address, why: "mechanism \(mechanism) is not CURVE")
            return reply("400", "CURVE required")
        }
        let key = frames[6]
        let allowed = registry.withLock { registry -> Bool? in
            guard var entry = registry.domains[domain] else { return nil }
            let ok = entry.allowed.contains(key)
            if ok { entry.accepted += 1 }
            registry.domains[domain] = entry
            return ok
        }
        switch allowed {
        case .some(true):
            return reply("200", "OK", user: Z85.encode(key) ?? "")
        case .some(false):
            refuse(domain: domain, key: key, address: address, why: "its public key is not on the allow list")
            return reply("400", "client key not allowed")
        case .none:
            refuse(domain: domain, key: key, address: address, why: "the ZAP domain is unknown")
            return reply("400", "unknown domain")
        }
    }

    /// Counts a refusal and logs it at warning: the first time for a key, then at most once a
    /// minute per key (with the number of refusals since), so a retrying client cannot flood the log.
    private func refuse(domain: String, key: [UInt8]?, address: String, why: String) {
        let now = ContinuousClock.now
        let logCount = registry.withLock { registry -> Int? in
            if var entry = registry.domains[domain] {
                entry.refused += 1
                registry.domains[domain] = entry
            }
            let id = key ?? []
            if registry.refusedKeys.count > 4096 && registry.refusedKeys[id] == nil { registry.refusedKeys.removeAll() }
            var record = registry.refusedKeys[id] ?? (0, nil)
            record.count += 1
            defer { registry.refusedKeys[id] = record }
            if let last = record.lastLogged, last.duration(to: now) < .seconds(60) { return nil }
            record.lastLogged = now
            return record.count
        }
        guard let count = logCount else { return }
        let who = key.flatMap { Z85.encode($0) } ?? "(no CURVE key)"
        logger.warning("refused a connection from \(address.isEmpty ? "?" : address) with client key \(who) to \(domain): \(why) (\(count) refusals of this key so far)")
    }
}

/// The handler's I/O thread: the only code that touches its ROUTER socket. libzmq sends each
/// request REQ-style (routing id, empty delimiter, request frames); the reply goes back with the
/// same envelope.
private final class ZAPLoop {
    let handler: ZAPHandler
    let socket: Socket
    let poller = Poller()

    init(handler: ZAPHandler, socket: Socket) {
        self.handler = handler
        self.socket = socket
    }

    func run() {
        poller.add(socket, events: .readable)
        while true {
            do {
                _ = try poller.poll(timeoutMilliseconds: -1)
                while let frames = try socket.receiveMultipart(dontWait: true) {
                    guard let delimiter = frames.firstIndex(where: \.isEmpty) else {
                        handler.logger.warning("ZAP: dropped a request without an envelope")
                        continue
                    }
                    let envelope = Array(frames[...delimiter])
                    try socket.send(multipart: envelope + handler.answer(Array(frames[(delimiter + 1)...])), dontWait: true)
                }
            } catch let error as ZMQError where error.isTerminated {
                break
            } catch {
                handler.logger.error("ZAP handler failed: \(error)")
                break
            }
        }
        socket.close()
    }
}

extension Socket {
    /// Makes this socket a CURVE server with `keys`. With an allow list, registers it with the
    /// context's ZAP handler (started here if needed, so it is bound before this socket binds)
    /// and returns the ZAP domain to unregister when the socket closes.
    func configureCurveServer(_ keys: CurveServerKeys?, logger: Logger) throws -> String? {
        guard let keys else { return nil }
        try set([.curveServer(true), .curveSecretKey(keys.secretKey), .curvePublicKey(keys.publicKey)])
        guard let allowed = keys.allowedClientKeys else { return nil }
        let handler = try ZAPHandler.handler(for: context, logger: logger)
        let domain = handler.register(allowedClientKeys: allowed, serverKey: keys.publicKey, prefix: keys.zapDomain)
        try set(.zapDomain(domain))
        return domain
    }

    /// Forgets the ZAP domain `configureCurveServer` registered for this socket.
    func releaseZAPDomain(_ domain: String?) {
        guard let domain else { return }
        try? ZAPHandler.handler(for: context).unregister(domain)
    }
}
