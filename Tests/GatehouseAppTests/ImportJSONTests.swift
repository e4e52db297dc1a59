import Foundation
import GatehouseContracts
import GatehouseSupport
import Testing
import UserTransfer

@testable import GatehouseApp

/// The jsonl reader of `gatehouse users import` (`JSONReader` with `.foundation`, issue 22 part 2) reads every line
/// as the `JSONSerialization` reader it replaced did: the same user, or the same refusal.
@Suite struct ImportJSONTests {
    /// The reader before `JSONReader`: Foundation's parser and `Fields`.
    static func reference(_ line: String) throws -> ImportedUser {
        let parsed: Any
        do { parsed = try JSONSerialization.jsonObject(with: Data(line.utf8)) } catch { throw ImportLineError("not JSON") }
        guard let object = parsed as? [String: Any] else { throw ImportLineError("not a JSON object") }
        if let unknown = object.keys.sorted().first(where: { !UserJSONL.fields.contains($0) }) {
            throw ImportLineError("unknown field \(unknown) (fields: \(UserJSONL.fields.sorted().joined(separator: ", ")))")
        }
        let fields = Fields(object)
        var user = ImportedUser()
        user.id = try fields.string("id")
        user.email = try fields.string("email")
        user.emailVerified = try fields.bool("emailVerified")
        user.displayName = try fields.string("displayName")
        user.photoURL = try fields.string("photoURL")
        user.passwordHash = try fields.string("passwordHash")
        user.providers = try fields.strings("providers")
        if let list = fields.object["identities"], !(list is NSNull) {
            let message = #"identities must be an array of {"provider": …, "subject": …} objects"#
            guard let objects = list as? [[String: Any]] else { throw ImportLineError(message) }
            user.identities = try objects.map { object in
                guard object.count == 2, let provider = object["provider"] as? String, let subject = object["subject"] as? String else {
                    throw ImportLineError(message)
                }
                return ImportedIdentity(provider: provider, subject: subject)
            }
        }
        user.customClaimsJSON = try fields.json("customClaims")
        user.disabled = try fields.bool("disabled")
        if let text = try fields.string("createdAt") {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            guard let date = formatter.date(from: text) ?? ISO8601DateFormatter().date(from: text) else {
                throw ImportLineError("createdAt must be an ISO 8601 time, e.g. 2024-05-01T12:00:00Z")
            }
            user.createdAt = date
        }
        return user
    }

    static func outcome(_ read: () throws -> ImportedUser) -> String {
        do { return "user \(try read())" } catch { return "error \(error)" }
    }

    static let lines: [String] = [
        #"{"id":"abcdefghijklmnopqrstuvwx","email":"a@example.com","emailVerified":true,"displayName":"A","createdAt":"2021-01-01T00:00:00Z"}"#,
        #" { "email" : "b@example.com" , "providers" : [ "google.com" , "apple.com" ] , "disabled" : false } "#,
        "\u{FEFF}{\"email\":\"bom@example.com\"}",
        #"{"email":"c@example.com","displayName":"\u00e9\ud83d\ude00 \"q\" \\ \/ \b\f\n\r\t"}"#,
        #"{"email":"d@example.com","displayName":"caf\u00E9","photoURL":null,"passwordHash":null,"providers":null}"#,
        #"{"email":"e@example.com","customClaims":{"tier":2,"roles":["a","b"],"nested":{"z":1,"a":[true,null,1.5e3]}}}"#,
        #"{"email":"f@example.com","customClaims":"{\"tier\":2}"}"#,
        #"{"email":"g@example.com","email":"h@example.com"}"#,
        #"{"email":"i@example.com","createdAt":"2024-05-01T12:00:00.123Z"}"#,
        #"{"email":"j@example.com","createdAt":"2024-05-01T14:00:00+02:00"}"#,
        #"{"email":"k@example.com","createdAt":"2024-05-01T12:00:00.123456Z"}"#,
        #"{"email":"l@example.com","createdAt":"2024-02-30T12:00:00Z"}"#,
        #"{"email":"m@example.com","createdAt":"yesterday"}"#,
        #"{"email":"n@example.com","customClaims":[1]}"#,
        #"{"email":"o@example.com","identities":[{"provider":"google.com","subject":"1082"},{"subject":"s-1","provider":"apple.com"}]}"#,
        #"{"email":"p@example.com","identities":null}"#,
        #"{"email":"q@example.com","identities":[{"provider":"google.com"}]}"#,
        #"{"email":"r@example.com","identities":[{"provider":"google.com","subject":1}]}"#,
        #"{"email":"s@example.com","identities":[{"provider":"google.com","subject":"x","extra":true}]}"#,
        #"{"email":"t@example.com","identities":{"provider":"google.com","subject":"x"}}"#,
        #"{"email":"o@example.com","customClaims":5}"#,
        #"{"email":"p@example.com","providers":["a",1]}"#,
        #"{"email":"q@example.com","providers":"google.com"}"#,
        #"{"email":"r@example.com","emailVerified":"yes"}"#,
        #"{"email":"s@example.com","disabled":null}"#,
        #"{"email":5}"#, #"{"email":-0.5e-3}"#, #"{"email":[]}"#, #"{"email":{}}"#,
        #"{"mail":"t@example.com"}"#, #"{}"#, #"[]"#, #"[1,2]"#, "5", "\"text\"", "null", "true", "",
        #"{"email":"u@example.com"} x"#, #"{"email":"u@example.com",}"#, #"{"email":"u@example.com","providers":["a" , ] , }"#,
        #"{"email":"u@example.com",,}"#, #"{,}"#, #"{"email":"u@example.com","providers":[,]}"#, #"{"email":"u@example.com","providers":["a",,]}"#,
        #"[1,]"#, #"{"email":"u@example.com","customClaims":{"a":1,}}"#, #"{"email":"u@example.com""#, #"{'email':'u'}"#,
        #"{"email":"v@example.com","displayName":"\ud83d"}"#, #"{"email":"v@example.com","displayName":"\ude00"}"#,
        #"{"email":"v@example.com","displayName":"\x"}"#, #"{"email":"v@example.com","displayName":"\u12"}"#,
        "{\"email\":\"w@example.com\",\"displayName\":\"tab\there\"}",
        #"{"email":01}"#, #"{"email":1.}"#, #"{"email":.5}"#, #"{"email":1e}"#, #"{"email":+1}"#, #"{"email":tru}"#, #"{"email":nul}"#,
        "{\"email\":\"x@example.com\"}\r",
        #"{"email":"y@example.com","customClaims":{"a":}}"#,
        "{\"email\":\"z@example.com\",\"customClaims\":" + String(repeating: "[", count: 600) + String(repeating: "]", count: 600) + "}",
        "{\"email\":\"z@example.com\",\"customClaims\":{\"a\":" + String(repeating: "[", count: 100) + String(repeating: "]", count: 100) + "}}",
    ]

    @Test func everyLineIsReadAsFoundationReadIt() {
        for line in Self.lines {
            let new = Self.outcome { try UserJSONL.user(fromLine: Array(line.utf8)) }
            let old = Self.outcome { try Self.reference(line) }
            #expect(new == old, "line \(line)")
        }
    }

    @Test func invalidUTF8IsNotJSON() {
        for bytes: [UInt8] in [
            Array(#"{"email":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8), Array(#"{"email":""#.utf8) + [0xFF] + Array(#""}"#.utf8),
            Array(#"{"email":"a@example.com",""#.utf8) + [0xED, 0xA0, 0x80] + Array(#"":1}"#.utf8),
        ] {
            let error = Self.outcome { try UserJSONL.user(fromLine: bytes) }
            #expect(error == "error not JSON")
            #expect((try? JSONSerialization.jsonObject(with: Data(bytes))) == nil)
        }
    }

    @Test func nestingDeeperThanTheLimitIsRefused() {
        let deep = "{\"email\":\"a@example.com\",\"customClaims\":{\"a\":" + String(repeating: "[", count: 5000) + String(repeating: "]", count: 5000) + "}}"
        #expect(throws: JSONTree.SyntaxError.self) { try JSONReader.objectMembers(in: Array(deep.utf8), options: .foundation) }
        let fine = "{\"email\":\"a@example.com\",\"x\":" + String(repeating: "[", count: 500) + String(repeating: "]", count: 500) + "}"
        #expect(throws: Never.self) { try JSONReader.objectMembers(in: Array(fine.utf8), options: .foundation) }
    }

    @Test func theFastISO8601ReaderGivesTheFormattersDates() throws {
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let plain = ISO8601DateFormatter()
        var generator = SystemRandomNumberGenerator()
        var checked = 0
        // Every form export writes (milliseconds), across the years import files hold, and whole seconds.
        for n in 0..<3000 {
            let ms = Int64.random(in: -2_208_988_800_000...4_102_444_800_000, using: &generator)
            let date = Date(timeIntervalSince1970: Double(ms) / 1000)
            for text in [fractional.string(from: date), plain.string(from: date)] {
                let fast = try #require(UserJSONL.fastISO8601(text), "\(text)")
                let slow = try #require(fractional.date(from: text) ?? plain.date(from: text))
                #expect(fast == slow, "\(text) (\(n))")
                checked += 1
            }
        }
        #expect(checked == 6000)
        for text in ["2024-02-29T23:59:59.999Z", "2000-02-29T00:00:00Z", "1970-01-01T00:00:00.000Z", "1969-12-31T23:59:59.001Z", "2021-01-01T00:00:00Z"] {
            #expect(UserJSONL.fastISO8601(text) == (fractional.date(from: text) ?? plain.date(from: text)), "\(text)")
        }
        // Other forms are left to the formatters.
        for text in ["2023-02-29T00:00:00Z", "2024-05-01T12:00:00+02:00", "2024-05-01T12:00:00.1Z", "2024-05-01 12:00:00Z", "2024-05-01T24:00:00Z", "0000-01-01T00:00:00Z"] {
            #expect(UserJSONL.fastISO8601(text) == nil, "\(text)")
        }
    }

    /// The export line before it was written directly: a `[String: Any]` through `JSONSerialization`.
    static func referenceLine(_ user: ImportedUser) -> String {
        var object: [String: Any] = ["emailVerified": user.emailVerified, "disabled": user.disabled, "providers": user.providers]
        if let id = user.id { object["id"] = id }
        if let email = user.email { object["email"] = email }
        if let name = user.displayName { object["displayName"] = name }
        if let photo = user.photoURL { object["photoURL"] = photo }
        if let hash = user.passwordHash { object["passwordHash"] = hash }
        if let claims = user.customClaimsJSON, let parsed = try? JSONSerialization.jsonObject(with: Data(claims.utf8)) { object["customClaims"] = parsed }
        if let created = user.createdAt { object["createdAt"] = UserJSONL.isoFormatter().string(from: created) }
        if !user.identities.isEmpty { object["identities"] = user.identities.map { ["provider": $0.provider, "subject": $0.subject] } }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    @Test func exportLinesAreWhatJSONSerializationWrote() throws {
        let controls = String((0..<0x20).map { Character(Unicode.Scalar(UInt8($0))) })
        let awkward = [
            "", "plain", "quote \" back \\ slash / and \u{7F}\u{80}\u{2028}\u{FEFF}", controls, "e\u{301}\"\u{301}x\\\u{301}", "日本語 😀",
            "https://example.com/a?b=c&d=<e>",
        ]
        var users: [ImportedUser] = [ImportedUser(), ImportedUser(email: "a@example.com")]
        for (n, text) in awkward.enumerated() {
            users.append(
                ImportedUser(
                    id: "id-\(text)", email: text, emailVerified: n % 2 == 0, displayName: text, photoURL: text, passwordHash: text,
                    providers: n % 3 == 0 ? [] : [text, "google.com"], customClaimsJSON: n % 2 == 0 ? #"{"z":[1,"/\u00e9"],"a":{"y":true,"b":null}}"# : nil,
                    disabled: n % 3 == 1, createdAt: Date(timeIntervalSince1970: 1_600_000_000.5 + Double(n)),
                    identities: n % 2 == 1 ? [] : [ImportedIdentity(provider: "google.com", subject: text), ImportedIdentity(provider: text, subject: "s")]))
        }
        users.append(ImportedUser(email: "b@example.com", customClaimsJSON: "not json"))
        let dates = UserJSONL.isoFormatter()
        for user in users {
            let line = UserJSONL.line(user, dates: dates)
            #expect(line == Self.referenceLine(user))
            // And it reads back as the same user (claims as compact sorted JSON).
            if user.email != nil, user.customClaimsJSON != "not json" {
                var back = try UserJSONL.user(fromLine: Array(line.utf8))
                back.customClaimsJSON = back.customClaimsJSON.map { _ in user.customClaimsJSON ?? "" }
                #expect(back == user)
            }
        }
    }
}
