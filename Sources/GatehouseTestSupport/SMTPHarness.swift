import Foundation

/// A real SMTP server (aiosmtpd, `Tests/Interop/smtp_server.py`) on a free loopback port with a
/// temporary folder of its own, and the messages it accepted. Needs python3 with aiosmtpd and
/// cryptography (`scripts/setup`).
public final class SMTPHarness: @unchecked Sendable {
    /// One message the server accepted: the envelope and the data as received (dots unstuffed).
    public struct Received: Decodable, Sendable {
        /// The envelope sender (`MAIL FROM`).
        public let mail_from: String
        /// The envelope recipients (`RCPT TO`).
        public let rcpt_tos: [String]
        /// The message as received, dots unstuffed.
        public let data: String
        /// Whether the session was encrypted.
        public let tls: Bool
        /// The AUTH mechanism used, if any.
        public let auth_mechanism: String?
        /// The `MAIL FROM` parameters (`SMTPUTF8`), upper-cased.
        public let mail_options: [String]?

        /// The `Message-ID` header's value.
        public var messageID: String? {
            header("Message-ID")
        }

        /// The value of the header `name` (unfolded lines are enough for these tests).
        public func header(_ name: String) -> String? {
            let head = data.components(separatedBy: "\r\n\r\n").first ?? ""
            return head.components(separatedBy: "\r\n").first { $0.lowercased().hasPrefix(name.lowercased() + ": ") }
                .map { String($0.dropFirst(name.count + 2)) }
        }

        /// The single-part body, base64-decoded.
        public var decodedText: String? {
            guard let range = data.range(of: "\r\n\r\n") else { return nil }
            let base64 = data[range.upperBound...].components(separatedBy: "\r\n").joined()
            return Data(base64Encoded: base64).map { String(decoding: $0, as: UTF8.self) }
        }
    }

    /// The harness script.
    public static let script = BuiltProducts.packageRoot.appendingPathComponent("Tests/Interop/smtp_server.py").path

    /// The server's own folder (certificates, received messages).
    public let folder: TemporaryDirectory
    /// The loopback port it listens on.
    public let port: Int
    /// The server process.
    public let process: ChildProcess

    /// The test CA's certificate (PEM), when the server speaks TLS.
    public var caFile: String { folder.path("certs/ca.pem") }

    private init(folder: TemporaryDirectory, port: Int, process: ChildProcess) {
        self.folder = folder
        self.port = port
        self.process = process
    }

    /// Starts a server (`tls`: none, starttls or implicit) and waits until it listens. `certificateNames`
    /// are the names the server's certificate is for; `auth` is `user:password`; `slow` delays the
    /// answer to the end of the data, `tarpit` every answer to MAIL, RCPT and DATA (seconds);
    /// `smtpUTF8` offers SMTPUTF8; `stallQuit` delays the answer to QUIT; `port` a chosen free port (default: a new one).
    public static func start(
        tls: String = "none", certificateNames: [String] = ["localhost", "127.0.0.1"], auth: String? = nil, mechanisms: String? = nil,
        slow: Double? = nil, tarpit: Double? = nil, smtpUTF8: Bool = false, stallQuit: Double? = nil,
        port: Int? = nil
    ) async throws -> SMTPHarness {
        let folder = try TemporaryDirectory(prefix: "gh-smtp")
        var arguments = [script, "serve", "--dir", folder.path, "--tls", tls, "--lifetime", "120"]
        if tls != "none" {
            let made = try await runProcess(
                URL(fileURLWithPath: "/usr/bin/env"), ["python3", script, "certs", folder.path("certs")] + certificateNames)
            guard made.status == 0 else { throw ProcessFailure("making the test certificates failed: \(made.stderr)") }
            arguments += ["--certs", folder.path("certs")]
        }
        if let auth { arguments += ["--auth", auth] }
        if let mechanisms { arguments += ["--mechanisms", mechanisms] }
        if let slow { arguments += ["--slow", String(slow)] }
        if let tarpit { arguments += ["--tarpit", String(tarpit)] }
        if smtpUTF8 { arguments.append("--smtputf8") }
        if let stallQuit { arguments += ["--stall-quit", String(stallQuit)] }
        let port = port ?? freeLoopbackPort()
        arguments += ["--port", String(port)]
        let log = folder.file("server.log")
        let process = try launchProcess(URL(fileURLWithPath: "/usr/bin/env"), ["python3"] + arguments, log: log)
        let harness = SMTPHarness(folder: folder, port: port, process: process)
        do {
            try await waitUntil("the SMTP server to listen on \(port)") {
                guard process.isRunning else {
                    throw ProcessFailure("the SMTP server exited: \((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
                }
                return FileManager.default.fileExists(atPath: folder.path("ready"))
            }
        } catch {
            harness.stop()
            throw error
        }
        return harness
    }

    /// Whether a `tarpit` server has begun stalling a conversation.
    public var stalled: Bool { FileManager.default.fileExists(atPath: folder.path("stalled")) }

    /// Every message accepted so far, in the order received.
    public func messages() throws -> [Received] {
        let dir = folder.file("messages")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        return try names.filter { $0.hasSuffix(".json") }
            .sorted { Int($0.dropLast(5)) ?? 0 < Int($1.dropLast(5)) ?? 0 }
            .map { try JSONDecoder().decode(Received.self, from: Data(contentsOf: dir.appendingPathComponent($0))) }
    }

    /// Kills the server and removes its folder (synchronous, for a `defer`).
    public func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        folder.remove()
    }
}
