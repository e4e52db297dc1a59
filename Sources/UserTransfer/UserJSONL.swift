import Foundation
import GatehouseContracts
import GatehouseSupport

/// The jsonl form of a user (`ImportedUser`): one JSON object per line, the same fields both
/// ways, so an export imports again. `gatehouse users import|export` read and write it, and so do
/// the admin API's import and export routes (`/admin/v1/users/import`, `/admin/v1/users/export`).
public enum UserJSONL {
    /// The fields of a jsonl line.
    public static let fields: Set<String> = [
        "id", "email", "emailVerified", "displayName", "photoURL", "passwordHash", "providers", "customClaims", "disabled", "createdAt",
        "identities",
    ]

    /// `bytes` read by Foundation as a JSON object; `ImportLineError` when it is not one.
    public static func object(_ bytes: [UInt8]) throws -> [String: Any] {
        let parsed: Any
        do { parsed = try JSONSerialization.jsonObject(with: Data(bytes)) } catch {
            throw ImportLineError("not JSON")
        }
        guard let object = parsed as? [String: Any] else { throw ImportLineError("not a JSON object") }
        return object
    }

    /// A jsonl line as a user; unknown fields and wrong types are refused. Read by `JSONReader`
    /// as Foundation's `JSONSerialization` reads (`.foundation`: a test compares the two on a
    /// corpus of lines), not by `JSONSerialization` itself, the CLI's main cost before.
    public static func user(fromLine bytes: [UInt8]) throws -> ImportedUser {
        let read: [JSONReader.Member]?
        do { read = try JSONReader.objectMembers(in: bytes, options: .foundation) } catch {
            throw ImportLineError("not JSON")
        }
        // `.foundation` reads an object or an array at the top: an array is JSON, not an object.
        guard let read else { throw ImportLineError("not a JSON object") }
        let members = Dictionary(read.map { ($0.name, $0) }, uniquingKeysWith: { $1 })
        if let unknown = members.keys.sorted().first(where: { !Self.fields.contains($0) }) {
            throw ImportLineError("unknown field \(unknown) (fields: \(Self.fields.sorted().joined(separator: ", ")))")
        }
        let fields = LineFields(members: members, line: bytes)
        var user = ImportedUser()
        user.id = try fields.string("id")
        user.email = try fields.string("email")
        user.emailVerified = try fields.bool("emailVerified")
        user.displayName = try fields.string("displayName")
        user.photoURL = try fields.string("photoURL")
        user.passwordHash = try fields.string("passwordHash")
        user.providers = try fields.strings("providers")
        user.identities = try fields.identities("identities")
        user.customClaimsJSON = try fields.json("customClaims")
        user.disabled = try fields.bool("disabled")
        if let text = try fields.string("createdAt") {
            guard let date = parseISO8601(text) else { throw ImportLineError("createdAt must be an ISO 8601 time, e.g. 2024-05-01T12:00:00Z") }
            user.createdAt = date
        }
        return user
    }

    /// The jsonl line of an exported user (without the newline).
    public static func line(_ user: ImportedUser) -> String { line(user, dates: isoFormatter()) }

    /// The jsonl line of `user`, its `createdAt` written by `dates` (`isoFormatter()`; made once
    /// per export, not per user: making one costs more than the rest of the line). Written
    /// directly, the members in the sorted order and with the escapes of
    /// `JSONSerialization`'s `[.sortedKeys, .withoutEscapingSlashes]` (a test compares them):
    /// boxing each user into `[String: Any]` and sorting its keys by collation was most of an
    /// export's time. Only custom claims (any JSON object) still go through Foundation.
    public static func line(_ user: ImportedUser, dates: ISO8601DateFormatter) -> String {
        var out = "{"
        func key(_ name: String) {
            if out.utf8.count > 1 { out += "," }
            out += "\"" + name + "\":"
        }
        func string(_ name: String, _ value: String?) {
            guard let value else { return }
            key(name)
            appendJSONString(value, to: &out)
        }
        if let created = user.createdAt { string("createdAt", dates.string(from: created)) }
        if let claims = user.customClaimsJSON, let parsed = try? JSONSerialization.jsonObject(with: Data(claims.utf8)),
            let data = try? JSONSerialization.data(withJSONObject: parsed, options: [.sortedKeys, .withoutEscapingSlashes])
        {
            key("customClaims")
            out += String(decoding: data, as: UTF8.self)
        }
        key("disabled")
        out += user.disabled ? "true" : "false"
        string("displayName", user.displayName)
        string("email", user.email)
        key("emailVerified")
        out += user.emailVerified ? "true" : "false"
        string("id", user.id)
        if !user.identities.isEmpty {  // absent when empty: the lines of users without one stay as they were
            key("identities")
            out += "["
            for (index, identity) in user.identities.enumerated() {
                if index > 0 { out += "," }
                out += "{\"provider\":"
                appendJSONString(identity.provider, to: &out)
                out += ",\"subject\":"
                appendJSONString(identity.subject, to: &out)
                out += "}"
            }
            out += "]"
        }
        string("passwordHash", user.passwordHash)
        string("photoURL", user.photoURL)
        key("providers")
        out += "["
        for (index, provider) in user.providers.enumerated() {
            if index > 0 { out += "," }
            appendJSONString(provider, to: &out)
        }
        return out + "]}"
    }

    /// `text` as a JSON string: `"` and `\\` escaped, the short escapes of \b \f \n \r \t, other
    /// control characters as \u00XX, everything else (`/` and non-ASCII included) as it is.
    public static func appendJSONString(_ text: String, to out: inout String) {
        out += "\""
        var plainFrom = text.utf8.startIndex
        for index in text.utf8.indices {
            let byte = text.utf8[index]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
            out.unicodeScalars.append(contentsOf: text.unicodeScalars[plainFrom..<index])
            switch byte {
            case UInt8(ascii: "\""): out += "\\\""
            case UInt8(ascii: "\\"): out += "\\\\"
            case 0x08: out += "\\b"
            case 0x0C: out += "\\f"
            case 0x0A: out += "\\n"
            case 0x0D: out += "\\r"
            case 0x09: out += "\\t"
            default:
                let hex = String(byte, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.utf8.count) + hex
            }
            plainFrom = text.utf8.index(after: index)
        }
        out.unicodeScalars.append(contentsOf: text.unicodeScalars[plainFrom...])
        out += "\""
    }

    /// `text` as an ISO 8601 time: the fast forms first, then the formatters' (with and without
    /// fractional seconds); nil when none reads it.
    public static func parseISO8601(_ text: String) -> Date? {
        if let date = fastISO8601(text) { return date }
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = fractional.date(from: text) { return date }
        return ISO8601DateFormatter().date(from: text)
    }

    /// `YYYY-MM-DDTHH:MM:SSZ` and `YYYY-MM-DDTHH:MM:SS.sssZ` (what export writes, and nearly
    /// every import file) without a formatter: making two `ISO8601DateFormatter`s per line cost
    /// more than the rest of the line. nil for any other form, which the formatters then read;
    /// the same `Date` as theirs (a test compares them).
    public static func fastISO8601(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { b -> Date? in
            guard b.count == 20 || b.count == 24, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"), b[10] == UInt8(ascii: "T"),
                b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":"), b[b.count - 1] == UInt8(ascii: "Z")
            else { return nil }
            func number(_ from: Int, _ count: Int) -> Int? {
                var value = 0
                for i in from..<(from + count) {
                    guard b[i] >= 0x30, b[i] <= 0x39 else { return nil }
                    value = value * 10 + Int(b[i] - 0x30)
                }
                return value
            }
            guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
                let minute = number(14, 2), let second = number(17, 2), year >= 1, (1...12).contains(month), hour < 24, minute < 60,
                second < 60
            else { return nil }
            var milliseconds = 0
            if b.count == 24 {
                guard b[19] == UInt8(ascii: "."), let fraction = number(20, 3) else { return nil }
                milliseconds = fraction
            }
            let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
            let days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
            guard (1...days).contains(day) else { return nil }
            // Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
            let y = month <= 2 ? year - 1 : year
            let era = (y >= 0 ? y : y - 399) / 400
            let yearOfEra = y - era * 400
            let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
            let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
            let epochDays = era * 146097 + dayOfEra - 719468
            let ms = Int64(((epochDays * 24 + hour) * 60 + minute) * 60 + second) * 1000 + Int64(milliseconds)
            return Date(timeIntervalSince1970: Double(ms) / 1000)
        }
    }

    /// The formatter of an exported `createdAt`: ISO 8601 in UTC with milliseconds.
    public static func isoFormatter() -> ISO8601DateFormatter {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }
}

/// Why a line of an import file (or of an import request) is refused before it reaches the
/// identity service.
public struct ImportLineError: Error, Sendable, CustomStringConvertible {
    /// The reason, in words an operator can act on.
    public var description: String
    /// A refusal for `description`.
    public init(_ description: String) { self.description = description }
}

/// Typed reads of a JSON object's members: absent and `null` are nil, a wrong type is refused
/// naming the field.
public struct Fields {
    /// The object.
    public let object: [String: Any]
    /// Reads of `object`.
    public init(_ object: [String: Any]) { self.object = object }

    /// A string member; nil when absent or null.
    public func string(_ name: String) throws -> String? {
        guard let value = object[name], !(value is NSNull) else { return nil }
        guard let text = value as? String else { throw ImportLineError("\(name) must be a string") }
        return text
    }

    /// A boolean member; false when absent or null.
    public func bool(_ name: String) throws -> Bool {
        guard let value = object[name], !(value is NSNull) else { return false }
        guard let flag = value as? Bool else { throw ImportLineError("\(name) must be true or false") }
        return flag
    }

    /// An array of strings; empty when absent or null.
    public func strings(_ name: String) throws -> [String] {
        guard let value = object[name], !(value is NSNull) else { return [] }
        guard let list = value as? [String] else { throw ImportLineError("\(name) must be an array of strings") }
        return list
    }

    /// A JSON object member, as compact JSON text (an object, or a string holding one).
    public func json(_ name: String) throws -> String? {
        guard let value = object[name], !(value is NSNull) else { return nil }
        if let text = value as? String { return text }
        guard value is [String: Any], let data = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys]) else {
            throw ImportLineError("\(name) must be a JSON object")
        }
        return String(decoding: data, as: UTF8.self)
    }
}

/// Typed reads of a jsonl line's members (`JSONReader.objectMembers`), with `Fields`' rules and
/// messages: absent and `null` are nil, a wrong type is refused naming the field.
struct LineFields {
    let members: [String: JSONReader.Member]
    /// The line, where an object member's text is.
    let line: [UInt8]

    func string(_ name: String) throws -> String? {
        switch members[name]?.value {
        case nil, .null?: return nil
        case .string(let text)?: return text
        default: throw ImportLineError("\(name) must be a string")
        }
    }

    func bool(_ name: String) throws -> Bool {
        switch members[name]?.value {
        case nil, .null?: return false
        case .bool(let flag)?: return flag
        default: throw ImportLineError("\(name) must be true or false")
        }
    }

    func strings(_ name: String) throws -> [String] {
        switch members[name]?.value {
        case nil, .null?: return []
        case .array(let values)?:
            var strings: [String] = []
            strings.reserveCapacity(values.count)
            for value in values {
                guard case .string(let text) = value else { throw ImportLineError("\(name) must be an array of strings") }
                strings.append(text)
            }
            return strings
        default: throw ImportLineError("\(name) must be an array of strings")
        }
    }

    /// An array of `{"provider": …, "subject": …}` objects (both strings, no other member);
    /// empty when absent or null.
    func identities(_ name: String) throws -> [ImportedIdentity] {
        switch members[name]?.value {
        case nil, .null?: return []
        case .array(let values)?:
            return try values.map { value in
                guard case .object(let members) = value, members.count == 2,
                    case .string(let provider)? = members.first(where: { $0.name == "provider" })?.value,
                    case .string(let subject)? = members.first(where: { $0.name == "subject" })?.value
                else { throw ImportLineError("\(name) must be an array of {\"provider\": …, \"subject\": …} objects") }
                return ImportedIdentity(provider: provider, subject: subject)
            }
        default: throw ImportLineError("\(name) must be an array of {\"provider\": …, \"subject\": …} objects")
        }
    }

    /// A JSON object member, as compact JSON text with sorted keys (an object, or a string
    /// holding one), as `Fields.json` writes it.
    func json(_ name: String) throws -> String? {
        guard let member = members[name] else { return nil }
        switch member.value {
        case .null: return nil
        case .string(let text): return text
        case .object:
            guard let value = try? JSONSerialization.jsonObject(with: Data(line[member.range])), value is [String: Any],
                let data = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys])
            else { throw ImportLineError("\(name) must be a JSON object") }
            return String(decoding: data, as: UTF8.self)
        default: throw ImportLineError("\(name) must be a JSON object")
        }
    }
}
