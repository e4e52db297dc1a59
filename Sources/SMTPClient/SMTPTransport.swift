import Foundation
import Logging
import Mail
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// Hands each mail to an SMTP relay on a connection of its own: `EHLO`, `STARTTLS` when
/// configured, `AUTH PLAIN` or `LOGIN` when credentials are configured, `MAIL FROM`, `RCPT TO`,
/// `DATA` (dot-stuffed), `QUIT`.
///
/// A `4xx` answer, a failed connection, a time-out or a failed TLS handshake throws
/// `MailDeliveryError.transient`; a `5xx` answer (a refused recipient, a refused login) throws
/// `.permanent`. Neither the mail's content nor the password appears in an error or a log line.
public struct SMTPTransport: MailTransport {
    /// The relay and how to reach it.
    public let configuration: SMTPConfiguration
    private let group: any EventLoopGroup
    private let logger: Logger
    /// The TLS context (trust roots plus the CA file), made once; its failure is reported at each delivery.
    private let tlsContext: Result<NIOSSLContext, MailDeliveryError>?

    /// A transport to the relay `configuration` names, on `eventLoopGroup`'s threads.
    public init(
        configuration: SMTPConfiguration, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "gatehouse.smtp")
    ) {
        self.configuration = configuration
        self.group = eventLoopGroup
        self.logger = logger
        self.tlsContext = configuration.tls == .none ? nil : Self.makeTLSContext(caFile: configuration.caFile)
    }

    /// Delivers `message` to its recipient through the relay, or throws a `MailDeliveryError`.
    public func deliver(_ message: MailMessage) async throws {
        if let problem = message.problem { throw MailDeliveryError.permanent("the mail cannot be sent: \(problem)") }
        try await send(from: message.fromAddress, to: [message.to], messageID: message.messageID) { envelope in
            envelope.applied(to: message).rendered()
        }
    }

    /// Sends `data` (a whole RFC 5322 message) from `sender` to `recipients` in one conversation.
    func send(_ data: String, from sender: String, to recipients: [String], messageID: String) async throws {
        try await send(from: sender, to: recipients, messageID: messageID) { _ in data }
    }

    /// Sends the message `data` renders for the envelope the relay allows (`SMTPEnvelope`: non-ASCII
    /// addresses as UTF-8 or IDNA) from `sender` to `recipients` in one conversation.
    /// Cancelling the task closes the connection at once (whatever the relay is doing) and throws
    /// `CancellationError`: a caller's deadline (the outbox's delivery timeout) ends a tarpit.
    func send(
        from sender: String, to recipients: [String], messageID: String, data: @escaping @Sendable (SMTPEnvelope) -> String
    ) async throws {
        if let problem = configuration.problem { throw MailDeliveryError.transient("SMTP configuration: \(problem)") }
        let conversation = Conversation(configuration: configuration, logger: logger)
        let cancellation = ConnectionCancellation()
        do {
            try await withTaskCancellationHandler {
                let tls = try tlsContext?.get()
                let connection = try await SMTPConnection.connect(
                    host: configuration.host, port: configuration.port, serverName: serverName,
                    implicitTLS: configuration.tls == .implicit ? tls : nil, connectTimeout: configuration.connectTimeout,
                    commandTimeout: configuration.commandTimeout, group: group)
                guard cancellation.attach(connection) else {
                    await connection.close()
                    throw CancellationError()
                }
                do {
                    try await conversation.run(on: connection, tls: tls, serverName: serverName, data: data, from: sender, to: recipients)
                    await connection.close()
                } catch {
                    await connection.close()
                    throw error
                }
            } onCancel: {
                cancellation.cancel()
            }
            logger.debug("mail handed to the relay", metadata: ["messageID": "\(messageID)", "relay": "\(relay)"])
        } catch {
            if Task.isCancelled || error is CancellationError {
                logger.debug("mail delivery cancelled; the connection is closed", metadata: ["messageID": "\(messageID)", "stage": "\(conversation.stage)"])
                throw CancellationError()
            }
            let failure = Self.deliveryError(error, during: conversation.stage, relay: relay, configuration: configuration)
            logger.debug("mail not handed to the relay", metadata: ["messageID": "\(messageID)", "error": "\(failure)"])
            throw failure
        }
    }

    private var relay: String { "\(configuration.host):\(configuration.port)" }

    /// The name sent as SNI and checked against the certificate's DNS names; nil for an IP address
    /// (NIOSSL then checks the certificate's IP addresses against the connected address).
    private var serverName: String? { configuration.hostIsIPAddress ? nil : configuration.host }

    private static func makeTLSContext(caFile: String?) -> Result<NIOSSLContext, MailDeliveryError> {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateVerification = .fullVerification
        tls.minimumTLSVersion = .tlsv12
        if let caFile {
            do {
                let certificates = try NIOSSLCertificate.fromPEMFile(caFile)
                guard !certificates.isEmpty else { return .failure(.transient("the SMTP CA file \(caFile) holds no certificate")) }
                tls.additionalTrustRoots = [.certificates(certificates)]
            } catch {
                return .failure(.transient("the SMTP CA file \(caFile) could not be read as PEM certificates: \(error)"))
            }
        }
        do {
            return .success(try NIOSSLContext(configuration: tls))
        } catch {
            return .failure(.transient("the TLS context could not be made: \(error)"))
        }
    }

    /// What a failure during `stage` means for the outbox: worth retrying, or not.
    static func deliveryError(_ error: any Error, during stage: String, relay: String, configuration: SMTPConfiguration) -> MailDeliveryError {
        switch error {
        case let error as MailDeliveryError:
            return error
        case SMTPFailure.timeout:
            return .transient("\(relay) did not answer \(stage) within \(configuration.commandTimeout)")
        case SMTPFailure.closed:
            return .transient("\(relay) closed the connection during \(stage)")
        case SMTPFailure.protocolViolation(let what):
            return .transient("\(relay) broke the SMTP protocol during \(stage): \(what)")
        case SMTPFailure.rejected(let reply) where (500...599).contains(reply.code) && Self.isAboutThisMail(stage):
            return .permanent("\(relay) refused \(stage): \(reply.summary)")
        case SMTPFailure.rejected(let reply) where (500...599).contains(reply.code):
            // A refusal of the relay itself (greeting, EHLO, STARTTLS, AUTH, MAIL FROM: a rotated
            // password, a sender not allowed) is the operator's to fix, not this mail's fault:
            // retried with backoff, so mail queued meanwhile is not dead-lettered at once.
            return .transient("\(relay) refused \(stage) (check the relay settings): \(reply.summary)")
        case SMTPFailure.rejected(let reply) where (400...499).contains(reply.code):
            return .transient("\(relay) deferred \(stage): \(reply.summary)")
        case SMTPFailure.rejected(let reply):
            return .transient("\(relay) answered \(stage) unexpectedly: \(reply.summary)")
        case is NIOSSLError, is NIOSSLExtraError, is BoringSSLError:
            return .transient("TLS with \(relay) failed during \(stage) (is its certificate trusted and for this host name?): \(error)")
        case ChannelError.connectTimeout:
            return .transient("could not connect to \(relay) within \(configuration.connectTimeout)")
        default:
            return stage == Conversation.connecting
                ? .transient("could not connect to \(relay): \(error)") : .transient("\(stage) with \(relay) failed: \(error)")
        }
    }
}

extension SMTPTransport {
    /// Whether a 5xx during `stage` is about this mail (its recipient or its content), so that
    /// retrying cannot help: only `RCPT TO`, `DATA` and the end of the message data.
    static func isAboutThisMail(_ stage: String) -> Bool {
        stage == "RCPT TO" || stage == "DATA" || stage == "the end of the message data"
    }
}

/// One SMTP conversation's steps; `stage` names the step under way (a command's verb, never its
/// arguments), for the error that ends it.
private final class Conversation {
    static let connecting = "connecting"
    /// The longest wait for the answer to `QUIT` (the mail is already accepted then).
    static let quitTimeout: Duration = .seconds(2)

    let configuration: SMTPConfiguration
    let logger: Logger
    private(set) var stage = Conversation.connecting

    init(configuration: SMTPConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    func run(
        on connection: SMTPConnection, tls: NIOSSLContext?, serverName: String?, data: (SMTPEnvelope) -> String, from sender: String,
        to recipients: [String]
    ) async throws {
        stage = "the greeting"
        try await connection.command(nil, expect: 220...220)
        stage = "EHLO"
        var hello = try await connection.command("EHLO \(configuration.heloName)")
        if configuration.tls == .startTLS {
            stage = "STARTTLS"
            // Never a silent downgrade to plain text.
            guard let tls else { throw MailDeliveryError.transient("STARTTLS is configured but no TLS context was made") }
            guard hello.extensions.contains("STARTTLS") else {
                throw MailDeliveryError.transient("\(configuration.host):\(configuration.port) does not offer STARTTLS (required by the configuration)")
            }
            try await connection.command("STARTTLS", expect: 220...220)
            try await connection.startTLS(context: tls, serverName: serverName)
            stage = "EHLO after STARTTLS"
            hello = try await connection.command("EHLO \(configuration.heloName)")
        }
        if let username = configuration.username, let password = configuration.password {
            try await authenticate(on: connection, username: username, password: password, offered: hello.authMechanisms)
        }
        stage = "MAIL FROM"
        let envelope = try SMTPEnvelope(
            sender: sender, recipients: recipients, smtpUTF8Offered: hello.extensions.contains("SMTPUTF8"),
            relay: "\(configuration.host):\(configuration.port)")
        try await connection.command("MAIL FROM:<\(envelope.sender)>" + (envelope.smtpUTF8 ? " SMTPUTF8" : ""))
        for recipient in envelope.recipients {
            stage = "RCPT TO"
            try await connection.command("RCPT TO:<\(recipient)>")
        }
        stage = "DATA"
        try await connection.command("DATA", expect: 354...354)
        stage = "the end of the message data"
        connection.send(SMTPData.stuffed(data(envelope)))
        try await connection.command(nil)
        stage = "QUIT"
        // The mail is accepted: a relay that does not answer QUIT changes nothing, and is not
        // waited for longer than `quitTimeout`.
        _ = try? await connection.command("QUIT", expect: 221...221, timeout: min(configuration.commandTimeout, Self.quitTimeout))
    }

    /// `AUTH PLAIN` when offered, else `AUTH LOGIN`; the credentials go only in the command lines,
    /// never in `stage`.
    private func authenticate(on connection: SMTPConnection, username: String, password: String, offered: Set<String>) async throws {
        func base64(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }
        if offered.contains("PLAIN") {
            stage = "AUTH PLAIN"
            try await connection.command("AUTH PLAIN " + base64([0] + Array(username.utf8) + [0] + Array(password.utf8)), expect: 235...235)
        } else if offered.contains("LOGIN") {
            stage = "AUTH LOGIN"
            try await connection.command("AUTH LOGIN", expect: 334...334)
            try await connection.command(base64(Array(username.utf8)), expect: 334...334)
            try await connection.command(base64(Array(password.utf8)), expect: 235...235)
        } else {
            let what = offered.isEmpty ? "no AUTH at all" : "AUTH " + offered.sorted().joined(separator: " ")
            throw MailDeliveryError.permanent(
                "\(configuration.host):\(configuration.port) offers neither AUTH PLAIN nor AUTH LOGIN (it offers \(what)), and credentials are configured")
        }
        logger.debug("authenticated to the relay", metadata: ["mechanism": "\(stage)"])
    }
}

/// The connection of one delivery, for the task's cancellation handler: cancelling before the
/// connection exists makes `attach` refuse it; cancelling after aborts it.
private final class ConnectionCancellation: Sendable {
    private struct State {
        var cancelled = false
        var connection: SMTPConnection?
    }
    private let state = Mutex(State())

    /// Records the new connection; false when the task was cancelled meanwhile (close it).
    func attach(_ connection: SMTPConnection) -> Bool {
        state.withLock { state in
            guard !state.cancelled else { return false }
            state.connection = connection
            return true
        }
    }

    /// Aborts the connection, if any, and refuses any later one.
    func cancel() {
        let connection = state.withLock { state -> SMTPConnection? in
            state.cancelled = true
            return state.connection
        }
        connection?.abort(CancellationError())
    }
}
