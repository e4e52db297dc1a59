import Foundation
import Mail

/// The addresses of one conversation as they go on the wire. All-ASCII addresses go as they
/// are. A non-ASCII address goes as UTF-8 with `MAIL FROM:<…> SMTPUTF8` when the relay offers
/// SMTPUTF8 (RFC 6531); else its domain goes as IDNA (`xn--`, RFC 3492) when its local part is
/// ASCII; else it cannot be sent through this relay: `MailDeliveryError.permanent`, saying why.
struct SMTPEnvelope: Equatable {
    /// The `MAIL FROM` address.
    var sender: String
    /// The `RCPT TO` addresses.
    var recipients: [String]
    /// Whether `MAIL FROM` carries `SMTPUTF8` (some address is not ASCII and the relay offers it).
    var smtpUTF8: Bool

    /// The envelope for `sender` and `recipients` through a relay that offers SMTPUTF8 or not.
    init(sender: String, recipients: [String], smtpUTF8Offered: Bool, relay: String) throws {
        let all = [sender] + recipients
        if all.allSatisfy({ $0.unicodeScalars.allSatisfy(\.isASCII) }) {
            (self.sender, self.recipients, smtpUTF8) = (sender, recipients, false)
        } else if smtpUTF8Offered {
            (self.sender, self.recipients, smtpUTF8) = (sender, recipients, true)
        } else {
            let ascii = try all.map { try Self.ascii($0, relay: relay) }
            (self.sender, self.recipients, smtpUTF8) = (ascii[0], Array(ascii.dropFirst()), false)
        }
    }

    /// `address` with its domain in IDNA, or a permanent failure when its local part is not ASCII.
    static func ascii(_ address: String, relay: String) throws -> String {
        if address.unicodeScalars.allSatisfy(\.isASCII) { return address }
        guard let at = address.lastIndex(of: "@") else { throw MailDeliveryError.permanent("\(address) is not an address") }
        let local = address[..<at], domain = String(address[address.index(after: at)...])
        guard local.unicodeScalars.allSatisfy(\.isASCII) else {
            throw MailDeliveryError.permanent(
                "the address \(address) has a non-ASCII local part and \(relay) does not offer SMTPUTF8 (RFC 6531): it cannot be sent through this relay")
        }
        guard let asciiDomain = IDNA.asciiDomain(domain) else {
            throw MailDeliveryError.permanent("the domain of \(address) cannot be written in IDNA (an empty or too long label)")
        }
        return "\(local)@\(asciiDomain)"
    }

    /// `message` with its `From` and `To` addresses as in this envelope (their ASCII forms when
    /// the relay has no SMTPUTF8), so headers hold no 8-bit address the relay would refuse.
    func applied(to message: MailMessage) -> MailMessage {
        var message = message
        if let to = recipients.first, to != message.to { message.to = to }
        let from = message.fromAddress
        if sender != from {
            if let open = message.from.lastIndex(of: "<") {
                message.from = message.from[..<open] + "<\(sender)>"
            } else {
                message.from = sender
            }
        }
        return message
    }
}
