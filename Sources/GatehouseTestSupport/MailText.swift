import Foundation
import IdentityPorts
import IdentityService
import Mail

/// The password reset code in a mail's text: its one line of 43 base64url characters (32
/// random bytes), or nil.
public func resetCode(in text: String) -> String? {
    text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first { line in
        line.utf8.count == 43 && line.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || $0 == "-" || $0 == "_" }
    }
}

extension MailMessage {
    /// The code in the mail's text (`resetCode(in:)`: reset, verification, change and revert codes
    /// have the same form).
    public var code: String? { resetCode(in: text) }
}

/// The mails of `kind` (every kind when nil) in `store`'s outbox, oldest first.
public func queuedMails(in store: any IdentityStorage, kind: String? = nil) async throws -> [MailMessage] {
    try await store.outboxEntries().map(\.message).filter { kind == nil || $0.kind == kind }
}
