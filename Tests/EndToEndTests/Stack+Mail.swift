import Foundation
import GatehouseApp
import GatehouseTestSupport

/// One mail delivered to a stack's local mailbox (the embedded default transport).
struct DeliveredMail {
    /// `X-Gatehouse-Kind`: `password_reset`, `verify_email`, `change_email`, `email_changed`.
    var kind: String
    /// The recipient.
    var to: String
    /// The decoded subject.
    var subject: String
    /// The decoded text body.
    var text: String

    /// The code in the text.
    var code: String? { resetCode(in: text) }
    /// The link in the text: its first line that starts with `http`.
    var link: String? {
        text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first { $0.hasPrefix("http") }
    }
}

extension Stack {
    /// The mails delivered to this stack's local mailbox (only those of `kind` when given), oldest first.
    func deliveredMails(_ kind: String? = nil) throws -> [DeliveredMail] {
        let reader = MailboxReader(dataDir: dataDir.path)
        return try reader.files().map { try reader.read($0) }
            .map {
                DeliveredMail(
                    kind: $0.headers["x-gatehouse-kind"] ?? "", to: $0.headers["to"] ?? "", subject: $0.headers["subject"] ?? "", text: $0.text)
            }
            .filter { kind == nil || $0.kind == kind }
    }
}
