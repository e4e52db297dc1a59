import Foundation

/// One mail Gatehouse sends (a password reset code, a verification link, a notice): what the
/// outbox stores and a `MailTransport` delivers. `rendered()` is its RFC 5322 / MIME text.
public struct MailMessage: Codable, Sendable, Hashable {
    /// The stable `Message-ID` (with its angle brackets), the same at every attempt, so a retry
    /// after an unclear failure is recognisable.
    public var messageID: String
    /// What kind of mail (`password_reset`, ...): the `X-Gatehouse-Kind` header, for metrics and logs.
    public var kind: String
    /// The sender, e.g. `Gatehouse <no-reply@example.com>`.
    public var from: String
    /// The one recipient's address.
    public var to: String
    /// The subject (any Unicode; encoded as RFC 2047 words when not ASCII).
    public var subject: String
    /// The plain-text body.
    public var text: String
    /// The HTML body; nil sends the plain text alone.
    public var html: String?
    /// When the mail was made (the `Date` header).
    public var date: Date
    /// When the code the mail carries stops working, or nil (a notice): a mail still queued then
    /// is not sent (the outbox marks it dead, `expired`). Absent from rows stored before it existed.
    public var expiresAt: Date?

    /// A mail; `messageID` defaults to a new random one at `domain`.
    public init(
        messageID: String? = nil, kind: String, from: String, to: String, subject: String, text: String, html: String? = nil,
        date: Date, domain: String = "gatehouse.invalid", expiresAt: Date? = nil
    ) {
        self.messageID = messageID ?? Self.newMessageID(domain: domain)
        self.kind = kind
        self.from = from
        self.to = to
        self.subject = subject
        self.text = text
        self.html = html
        self.date = date
        self.expiresAt = expiresAt
    }

    /// A new `<random@domain>` message id (128 random bits).
    public static func newMessageID(domain: String) -> String {
        var generator = SystemRandomNumberGenerator()
        let random = (0..<2).map { _ in String(generator.next() as UInt64, radix: 36) }.joined(separator: ".")
        return "<\(random)@\(domain)>"
    }

    /// The address inside `from` (`Name <addr>` or a bare address): the SMTP envelope sender.
    public var fromAddress: String {
        guard let open = from.lastIndex(of: "<"), let close = from.lastIndex(of: ">"), open < close else {
            return from.trimmingCharacters(in: .whitespaces)
        }
        return String(from[from.index(after: open)..<close])
    }

    /// Why this mail cannot be sent as is (a header with a line break or a control character,
    /// an address without `@`), or nil. Header injection is refused here, whatever the caller.
    public var problem: String? {
        for (name, value) in [("Message-ID", messageID), ("kind", kind), ("From", from), ("To", to), ("Subject", subject)] {
            if value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                return "\(name) contains a control character or a line break"
            }
        }
        for (name, address) in [("From", fromAddress), ("To", to)] {
            let parts = address.split(separator: "@", omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty, !address.contains(" "), address.utf8.count <= 254 else {
                return "\(name) is not an address"
            }
        }
        return nil
    }

    /// The whole message (headers and MIME body), lines ending in CRLF. Bodies are base64 (no
    /// line is longer than 76 characters, and no line starts with a dot).
    public func rendered() -> String {
        var lines: [String] = [
            "Message-ID: \(messageID)",
            "Date: \(Self.rfc5322Date(date))",
            "From: \(Self.encodedHeader(from, isAddress: true))",
            "To: \(to)",
            "Subject: \(Self.encodedHeader(subject, isAddress: false))",
            "MIME-Version: 1.0",
            "X-Gatehouse-Kind: \(kind)",
            "Auto-Submitted: auto-generated",
        ]
        if let html {
            let boundary = "=_gatehouse_" + messageID.filter { $0.isLetter || $0.isNumber }
            lines.append("Content-Type: multipart/alternative; boundary=\"\(boundary)\"")
            lines.append("")
            for (type, body) in [("text/plain", text), ("text/html", html)] {
                lines.append("--\(boundary)")
                lines.append("Content-Type: \(type); charset=utf-8")
                lines.append("Content-Transfer-Encoding: base64")
                lines.append("")
                lines.append(contentsOf: Self.base64Lines(body))
            }
            lines.append("--\(boundary)--")
        } else {
            lines.append("Content-Type: text/plain; charset=utf-8")
            lines.append("Content-Transfer-Encoding: base64")
            lines.append("")
            lines.append(contentsOf: Self.base64Lines(text))
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }

    /// `text` as it goes in a header: itself when ASCII, else RFC 2047 base64 words (for an
    /// address with a display name, only the name is encoded).
    static func encodedHeader(_ text: String, isAddress: Bool) -> String {
        if text.unicodeScalars.allSatisfy({ $0.isASCII }) { return text }
        if isAddress, let open = text.lastIndex(of: "<") {
            let name = text[..<open].trimmingCharacters(in: .whitespaces)
            return encodedWords(name) + " " + text[open...]
        }
        return encodedWords(text)
    }

    /// RFC 2047 `=?utf-8?B?...?=` words of at most 45 bytes of text each (whole characters).
    static func encodedWords(_ text: String) -> String {
        var words: [String] = [], chunk = ""
        for character in text {
            if chunk.utf8.count + String(character).utf8.count > 45 {
                words.append(chunk)
                chunk = ""
            }
            chunk.append(character)
        }
        if !chunk.isEmpty { words.append(chunk) }
        return words.map { "=?utf-8?B?\(Data($0.utf8).base64EncodedString())?=" }.joined(separator: "\r\n ")
    }

    static func base64Lines(_ text: String) -> [String] {
        let encoded = Data(text.utf8).base64EncodedString()
        var lines: [String] = []
        var index = encoded.startIndex
        while index < encoded.endIndex {
            let end = encoded.index(index, offsetBy: 76, limitedBy: encoded.endIndex) ?? encoded.endIndex
            lines.append(String(encoded[index..<end]))
            index = end
        }
        return lines
    }

    static func rfc5322Date(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss '+0000'"
        return formatter.string(from: date)
    }
}

/// Delivers mail: over SMTP to a relay, or into a local mailbox folder (the embedded default).
public protocol MailTransport: Sendable {
    /// Delivers `message`, or throws a `MailDeliveryError` saying whether a retry may succeed.
    func deliver(_ message: MailMessage) async throws
}

/// A transport that keeps what it delivered (the local mailbox): the outbox's hourly purge
/// removes mail delivered before the outbox's retention, as it purges its own sent rows.
public protocol RetainingMailTransport: MailTransport {
    /// Removes the mail delivered before `date`; returns how many were removed.
    func purge(deliveredBefore date: Date) throws -> Int
}

/// Why a delivery failed, and whether to try again.
public enum MailDeliveryError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Worth retrying later: the relay is unreachable, timed out, or answered 4xx.
    case transient(String)
    /// Retrying will not help: the relay answered 5xx (a refused recipient, a refused login),
    /// or the message is malformed.
    case permanent(String)

    /// The reason, for logs and the outbox's `lastError` (never a mail's content).
    public var description: String {
        switch self {
        case .transient(let reason): return "transient: \(reason)"
        case .permanent(let reason): return "permanent: \(reason)"
        }
    }
}
