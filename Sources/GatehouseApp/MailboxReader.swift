import Foundation

/// Reads the local mailbox (`<data folder>/mailbox`, one `.eml` file per mail) for
/// `gatehouse mail list|show`.
public struct MailboxReader: Sendable {
    /// One mail file, its headers decoded.
    public struct Mail: Sendable, Equatable {
        /// The file's name in the mailbox.
        public var file: String
        /// Headers by lower-cased name (RFC 2047 words decoded).
        public var headers: [String: String]
        /// The plain-text body, decoded.
        public var text: String
        /// The HTML body, decoded, if any.
        public var html: String?
        /// The file as written.
        public var raw: String
    }

    /// The mailbox folder.
    public let folder: URL

    /// The mailbox of the data folder `dataDir`.
    public init(dataDir: String) {
        folder = MailSettings.mailboxFolder(dataDir: dataDir)
    }

    /// The mail files' names, oldest first (none when the folder does not exist yet).
    public func files() throws -> [String] {
        guard FileManager.default.fileExists(atPath: folder.path) else { return [] }
        return try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".eml") }.sorted()
    }

    /// The mail named by `reference`: a file name, a Message-ID (with or without its angle
    /// brackets), a 1-based position in `files()` (negative: from the newest), or `last`.
    public func mail(_ reference: String) throws -> Mail? {
        let names = try files()
        if reference == "last" { return try names.last.map(read) }
        if let index = Int(reference) {
            let position = index > 0 ? index - 1 : names.count + index
            return names.indices.contains(position) ? try read(names[position]) : nil
        }
        if names.contains(reference) { return try read(reference) }
        let id = reference.hasPrefix("<") ? reference : "<\(reference)>"
        for name in names.reversed() {
            let mail = try read(name)
            if mail.headers["message-id"] == id { return mail }
        }
        return nil
    }

    /// Reads and decodes the file `name`.
    public func read(_ name: String) throws -> Mail {
        Self.parse(try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8), file: name)
    }

    /// The mail in the message text `raw` (as a mailbox file holds it, or a relay received it),
    /// known as `file`.
    public static func parse(_ raw: String, file: String = "") -> Mail {
        let (headers, body) = split(raw)
        var text = "", html: String?
        if let type = headers["content-type"], type.hasPrefix("multipart/"), let boundary = Self.boundary(type) {
            for part in body.components(separatedBy: "--\(boundary)").dropFirst() where !part.hasPrefix("--") {
                let (partHeaders, partBody) = Self.split(String(part.drop(while: { $0 == "\r" || $0 == "\n" })))
                let decoded = Self.decodeBody(partBody, headers: partHeaders)
                if partHeaders["content-type"]?.hasPrefix("text/html") == true { html = decoded } else { text = decoded }
            }
        } else {
            text = Self.decodeBody(body, headers: headers)
        }
        return Mail(file: file, headers: headers, text: text, html: html, raw: raw)
    }

    static func split(_ message: String) -> ([String: String], String) {
        let lines = message.replacingOccurrences(of: "\r\n", with: "\n").components(separatedBy: "\n")
        var headers: [String: String] = [:], last: String?, index = 0
        while index < lines.count, !lines[index].isEmpty {
            let line = lines[index]
            if line.first == " " || line.first == "\t", let name = last {
                headers[name, default: ""] += line.trimmingCharacters(in: .whitespaces)
            } else if let colon = line.firstIndex(of: ":") {
                let name = line[..<colon].lowercased()
                headers[name] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                last = name
            }
            index += 1
        }
        for (name, value) in headers { headers[name] = decodeWords(value) }
        return (headers, lines.dropFirst(index + 1).joined(separator: "\n"))
    }

    static func boundary(_ contentType: String) -> String? {
        guard let range = contentType.range(of: "boundary=") else { return nil }
        return String(contentType[range.upperBound...]).trimmingCharacters(in: CharacterSet(charactersIn: "\" ;"))
    }

    static func decodeBody(_ body: String, headers: [String: String]) -> String {
        guard headers["content-transfer-encoding"]?.lowercased() == "base64" else { return body }
        let compact = body.filter { !$0.isWhitespace }
        return Data(base64Encoded: compact).map { String(decoding: $0, as: UTF8.self) } ?? body
    }

    /// Decodes RFC 2047 `=?utf-8?B?...?=` words (as `MailMessage` writes them).
    static func decodeWords(_ value: String) -> String {
        guard value.contains("=?") else { return value }
        var result = "", rest = Substring(value)
        while let start = rest.range(of: "=?utf-8?B?", options: .caseInsensitive) {
            result += rest[..<start.lowerBound].trimmingCharacters(in: .whitespaces)
            guard let end = rest[start.upperBound...].range(of: "?=") else { return result + rest[start.lowerBound...] }
            let word = rest[start.upperBound..<end.lowerBound]
            result += Data(base64Encoded: String(word)).map { String(decoding: $0, as: UTF8.self) } ?? String(word)
            rest = rest[end.upperBound...]
            if !rest.trimmingCharacters(in: .whitespaces).hasPrefix("=?") { result += rest.hasPrefix(" ") ? " " : "" }
        }
        return result + rest.trimmingCharacters(in: .whitespaces)
    }
}
