import Foundation

/// One reply of the relay: its three-digit code and the text of its lines (RFC 5321 §4.2).
struct SMTPReply: Sendable, Equatable {
    /// The reply code (`250`, `354`, `451`, `550`, ...).
    var code: Int
    /// The text after the code on each line (`["example.com", "STARTTLS", "AUTH PLAIN LOGIN"]`).
    var lines: [String]

    /// `451 first line`, printable and short: what an error says about this reply.
    var summary: String {
        let text = (lines.first ?? "").unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? " " : String($0) }.joined()
        let short = text.count > 160 ? String(text.prefix(160)) + "…" : text
        return short.isEmpty ? "\(code)" : "\(code) \(short)"
    }

    /// The `EHLO` keywords, upper-cased (`STARTTLS`, `AUTH PLAIN LOGIN`): every line after the first.
    var extensions: [String] { lines.dropFirst().map { $0.uppercased() } }

    /// The mechanisms an `EHLO` reply offers for `AUTH` (also the old `AUTH=` form).
    var authMechanisms: Set<String> {
        var mechanisms: Set<String> = []
        for line in extensions where line.hasPrefix("AUTH ") || line.hasPrefix("AUTH=") {
            mechanisms.formUnion(line.dropFirst(5).split(separator: " ").map(String.init))
        }
        return mechanisms
    }
}

/// Joins reply lines (`250-first`, `250-second`, `250 last`) into replies.
struct SMTPReplyParser {
    /// The longest reply accepted, in lines (a relay that talks on forever is cut off).
    static let maximumLines = 100

    private var code: Int?
    private var lines: [String] = []

    /// Takes one line (without its line break); returns the reply it completes, if it completes one.
    /// Throws `SMTPFailure.protocolViolation` for a line that is not a reply line.
    mutating func feed(_ line: String) throws -> SMTPReply? {
        let bytes = Array(line.utf8)
        guard bytes.count >= 3, bytes[0..<3].allSatisfy({ (0x30...0x39).contains($0) }),
            bytes.count == 3 || bytes[3] == UInt8(ascii: " ") || bytes[3] == UInt8(ascii: "-"),
            let lineCode = Int(String(decoding: bytes[0..<3], as: UTF8.self))
        else {
            throw SMTPFailure.protocolViolation("a line that is not an SMTP reply")
        }
        if let code, code != lineCode { throw SMTPFailure.protocolViolation("a multi-line reply whose codes differ") }
        code = lineCode
        lines.append(bytes.count > 4 ? String(decoding: bytes[4...], as: UTF8.self) : "")
        guard bytes.count == 3 || bytes[3] == UInt8(ascii: " ") else {
            if lines.count >= Self.maximumLines { throw SMTPFailure.protocolViolation("a reply of more than \(Self.maximumLines) lines") }
            return nil
        }
        let reply = SMTPReply(code: lineCode, lines: lines)
        self = SMTPReplyParser()
        return reply
    }
}

/// What the `DATA` command sends.
enum SMTPData {
    /// `message` as sent after `DATA`: every line ended by CRLF (a bare LF or CR becomes CRLF),
    /// a dot doubled at the start of any line (RFC 5321 §4.5.2), then the `.` line that ends it.
    static func stuffed(_ message: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(message.utf8.count + 64)
        var atLineStart = true, afterCR = false
        for byte in message.utf8 {
            if byte == 0x0A, afterCR {
                afterCR = false
                continue
            }
            afterCR = byte == 0x0D
            if byte == 0x0D || byte == 0x0A {
                out += [0x0D, 0x0A]
                atLineStart = true
                continue
            }
            if atLineStart, byte == UInt8(ascii: ".") { out.append(byte) }
            out.append(byte)
            atLineStart = false
        }
        if !atLineStart { out += [0x0D, 0x0A] }
        out += Array(".\r\n".utf8)
        return out
    }
}

/// Failures inside one SMTP conversation, before `SMTPTransport` says which kind of delivery error each is.
enum SMTPFailure: Error, Sendable {
    /// The relay did not answer a command in time.
    case timeout
    /// The relay closed the connection.
    case closed
    /// The relay sent something that is not SMTP (or bytes before a TLS handshake).
    case protocolViolation(String)
    /// The relay answered with a code the command does not expect.
    case rejected(SMTPReply)
}
