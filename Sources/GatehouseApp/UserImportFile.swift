import Foundation
import GatehouseContracts
import UserTransfer
import IdentityService

/// The formats `gatehouse users import` reads.
public enum UserImportFormat: String, Sendable, CaseIterable {
    /// One JSON object per line (the format `gatehouse users export` writes).
    case jsonl
    /// The JSON `firebase auth:export` writes: `{"users":[{localId, email, ...}, ...]}`.
    case firebase
}

/// A Firebase project's password hash parameters (console: Authentication → Users → ⋮ →
/// Password hash parameters), needed to import its users' passwords.
public struct FirebaseHashParameters: Sendable, Hashable {
    /// `base64_signer_key`, decoded.
    public var signerKey: [UInt8]
    /// `base64_salt_separator`, decoded.
    public var saltSeparator: [UInt8]
    /// `rounds`.
    public var rounds: Int
    /// `mem_cost`.
    public var memCost: Int

    /// The parameters as the console shows them (base64 and decimal); nil when a base64 value
    /// does not decode.
    public init?(signerKeyBase64: String, saltSeparatorBase64: String, rounds: Int, memCost: Int) {
        guard let key = Self.lenientBase64(signerKeyBase64), let separator = Self.lenientBase64(saltSeparatorBase64) else { return nil }
        signerKey = Array(key)
        saltSeparator = Array(separator)
        self.rounds = rounds
        self.memCost = memCost
    }

    /// The stored form of a Firebase user's password (`$firebase-scrypt$`, which
    /// `PasswordHashing.verify` checks with Firebase's modified scrypt).
    public func storedHash(salt: [UInt8], hash: [UInt8]) -> String {
        PasswordHashing.firebaseScryptString(salt: salt, saltSeparator: saltSeparator, signerKey: signerKey, rounds: rounds, memCost: memCost, hash: hash)
    }
}

/// One user read from an import file, or why its line could not be read.
public struct ImportFileItem: Sendable {
    /// The line the user starts on (1-based).
    public var line: Int
    /// The user, or the reason the line is refused.
    public var user: Result<ImportedUser, ImportLineError>
}

/// Reads an import file as a stream (never the whole file in memory): `next()` gives one user
/// at a time, in file order.
public final class UserImportFile {
    /// The longest line (jsonl) or user object (firebase) accepted.
    public static let maxRecordBytes = 64 * 1024
    private let handle: FileHandle
    private let format: UserImportFormat
    private let firebase: FirebaseHashParameters?
    private var buffer: [UInt8] = []
    private var position = 0
    private var atEnd = false
    private var line = 1
    // The firebase scanner's state.
    private var depth = 0
    private var inUsers = false
    private var lastKey = ""

    /// Opens `path` (`-`: standard input) to read in `format`.
    public init(path: String, format: UserImportFormat, firebase: FirebaseHashParameters? = nil) throws {
        if path == "-" {
            handle = .standardInput
        } else {
            guard let opened = FileHandle(forReadingAtPath: path) else { throw ImportLineError("cannot open \(path) for reading") }
            handle = opened
        }
        self.format = format
        self.firebase = firebase
    }

    deinit { try? handle.close() }

    /// The next user, nil at the end of the file; throws `ImportLineError` when the file itself
    /// cannot be read further (firebase: not the JSON of an export).
    public func next() throws -> ImportFileItem? {
        switch format {
        case .jsonl: return try nextLine()
        case .firebase: return try nextFirebaseUser()
        }
    }

    private func fill() throws -> Bool {
        if atEnd { return false }
        let chunk = try handle.read(upToCount: 1 << 20) ?? Data()
        if chunk.isEmpty {
            atEnd = true
            return false
        }
        if position > 0 {
            buffer.removeFirst(position)
            position = 0
        }
        buffer.append(contentsOf: chunk)
        return true
    }

    private func nextLine() throws -> ImportFileItem? {
        while true {
            if let end = buffer[position...].firstIndex(of: UInt8(ascii: "\n")) {
                let bytes = buffer[position..<end]
                position = end + 1
                let number = line
                line += 1
                if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
                if bytes.count > Self.maxRecordBytes {
                    return ImportFileItem(line: number, user: .failure(ImportLineError("the line is longer than \(Self.maxRecordBytes) bytes")))
                }
                return ImportFileItem(line: number, user: Result { try UserJSONL.user(fromLine: Array(bytes)) }.mapError { $0 as! ImportLineError })
            }
            if buffer.count - position > Self.maxRecordBytes {
                // Refuse the line, not the file: drop it up to its end.
                let number = line
                position = buffer.count
                while true {
                    guard try fill() else { break }
                    if let end = buffer[position...].firstIndex(of: UInt8(ascii: "\n")) {
                        position = end + 1
                        line += 1
                        break
                    }
                    position = buffer.count
                }
                return ImportFileItem(line: number, user: .failure(ImportLineError("the line is longer than \(Self.maxRecordBytes) bytes")))
            }
            if try !fill() {
                guard position < buffer.count else { return nil }
                let bytes = buffer[position...]
                position = buffer.count
                if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return nil }
                return ImportFileItem(line: line, user: Result { try UserJSONL.user(fromLine: Array(bytes)) }.mapError { $0 as! ImportLineError })
            }
        }
    }

    /// The next object of the top-level `users` array, found by a scanner that tracks strings and
    /// nesting only; each object is then parsed on its own.
    private func nextFirebaseUser() throws -> ImportFileItem? {
        var start: Int?
        var startLine = line
        var inString = false, escaped = false
        var stringStart = 0
        while true {
            if position >= buffer.count {
                // Keep the object and the string being read: fill() drops what is before `position`.
                let anchor = min(start ?? position, inString ? stringStart : position)
                let resume = position - anchor
                position = anchor
                if try !fill() {
                    if depth != 0 || start != nil { throw ImportLineError("the file ends inside a JSON value (line \(line)): not a complete Firebase export") }
                    return nil
                }
                start = start.map { $0 - anchor }
                stringStart -= anchor
                position = resume
                continue
            }
            if let begun = start, position - begun > Self.maxRecordBytes {
                throw ImportLineError("the user starting on line \(startLine) is larger than \(Self.maxRecordBytes) bytes")
            }
            let byte = buffer[position]
            position += 1
            if byte == UInt8(ascii: "\n") { line += 1 }
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                    if depth == 1 { lastKey = String(decoding: buffer[stringStart..<(position - 1)], as: UTF8.self) }
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""):
                inString = true
                stringStart = position
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                if depth == 1, byte == UInt8(ascii: "[") { inUsers = lastKey == "users" }
                if depth == 2, inUsers, byte == UInt8(ascii: "{") {
                    start = position - 1
                    startLine = line
                }
                if depth == 0, byte != UInt8(ascii: "{") { throw ImportLineError("not a Firebase export: the file must hold a JSON object {\"users\": [...]}") }
                depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                if depth < 0 { throw ImportLineError("not a Firebase export: unbalanced JSON on line \(line)") }
                if depth == 2, inUsers, let begun = start, byte == UInt8(ascii: "}") {
                    let bytes = Array(buffer[begun..<position])
                    return ImportFileItem(
                        line: startLine, user: Result { try Self.firebaseUser(bytes, parameters: firebase) }.mapError { $0 as! ImportLineError })
                }
                if depth == 1 { inUsers = false }
            default:
                if depth == 0, byte > 0x20 { throw ImportLineError("not a Firebase export: the file must hold a JSON object {\"users\": [...]}") }
            }
        }
    }
}

extension FirebaseHashParameters {
    /// Base64 as Firebase shows it (standard, padded), also accepted unpadded or in the URL-safe
    /// alphabet; nil when it is neither.
    static func lenientBase64(_ text: String) -> Data? {
        var standard = text.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while standard.utf8.count % 4 != 0 { standard += "=" }
        return Data(base64Encoded: standard)
    }
}
