import Foundation

/// What `gatehouse serve` prints once its roles have started: where the API, the admin API and
/// the mail are, and the command that makes the first admin API key, so a first run needs no guide.
public struct ServeBanner: Sendable {
    /// The lines, ending in a newline.
    public let text: String

    /// The banner of the stack `config` describes; `command` is how this binary was invoked.
    public init(config: Config, command: String = CommandLine.arguments.first ?? "gatehouse") throws {
        let host = try config.required(ConfigTable.httpHost)
        let port = try config.int(ConfigTable.httpPort, in: 0...65_535)
        let adminHost = try config.required(ConfigTable.adminHost)
        let adminPort = try config.int(ConfigTable.adminPort)
        let dataDir = try config.required(ConfigTable.dataDir)
        var lines = ["Gatehouse is running (identity, token and gateway in one process):"]
        lines.append("  API        http://\(Self.hostForURL(host)):\(port)  (its OpenAPI document: /openapi.json)")
        if adminPort == 0 {
            lines.append("  admin API  off (GATEHOUSE_ADMIN_PORT=0)")
        } else {
            lines.append("  admin API  http://\(Self.hostForURL(adminHost)):\(adminPort)/admin/v1  (its OpenAPI document: /admin/openapi.json)")
        }
        if let relay = config.string(ConfigTable.smtpHost), !relay.isEmpty {
            lines.append("  mail       to the SMTP relay \(relay)")
        } else {
            let mailbox = URL(fileURLWithPath: dataDir).appendingPathComponent("mailbox").path
            lines.append("  mail       kept in \(mailbox) (no GATEHOUSE_SMTP_HOST): `\(command) mail list --data-dir \(dataDir)`")
        }
        lines.append("  first admin API key:  \(command) admin keys create --name me --scope all --data-dir \(dataDir)")
        text = lines.joined(separator: "\n") + "\n"
    }

    /// An IPv6 address in brackets, as a URL needs it.
    static func hostForURL(_ host: String) -> String { host.contains(":") ? "[\(host)]" : host }
}
