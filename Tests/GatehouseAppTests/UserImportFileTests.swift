import Foundation
import GatehouseApp
import GatehouseContracts
import GatehouseTestSupport
import Testing
import UserTransfer

/// The import file readers of `gatehouse users import` (issue 22 §5): streamed across read
/// chunks, one record at a time, line numbers kept; the Firebase password's stored form.
@Suite struct UserImportFileTests {
    func readAll(_ path: String, _ format: UserImportFormat, _ parameters: FirebaseHashParameters? = nil) throws -> [ImportFileItem] {
        let file = try UserImportFile(path: path, format: format, firebase: parameters)
        var items: [ImportFileItem] = []
        while let item = try file.next() { items.append(item) }
        return items
    }

    @Test func firebaseExportIsStreamedAcrossChunksWithItsPasswordsInTheStoredForm() throws {
        let dir = try TemporaryDirectory(prefix: "import-file")
        defer { dir.remove() }
        // The test vector of github.com/firebase/scrypt's README.
        let parameters = try #require(
            FirebaseHashParameters(
                signerKeyBase64: "jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA==",
                saltSeparatorBase64: "Bw==", rounds: 8, memCost: 14))
        let padding = String(repeating: "x", count: 900)
        var text = "{\n  \"users\" : [\n"
        for n in 0..<3000 {
            if n > 0 { text += ",\n" }
            text += #"    {"localId":"fb\#(String(format: "%025d", n))","email":"u\#(n)@example.com","displayName":"\#(padding) \"}{[\"","#
            text += #""passwordHash":"lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ==","salt":"42xEC+ixf3L2lw==","#
            text += #""createdAt":"1600000000123","providerUserInfo":[{"providerId":"password"},{"providerId":"google.com"}]}"#
        }
        text += "\n  ]\n}\n"
        let path = dir.path("firebase.json")
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        let items = try readAll(path, .firebase, parameters)
        #expect(items.count == 3000)
        #expect(items.map(\.line) == (0..<3000).map { $0 + 3 })
        let last = try items[2999].user.get()
        #expect(last.id == "fb0000000000000000000002999" && last.email == "u2999@example.com")
        #expect(last.displayName == padding + #" "}{[""#)
        #expect(last.providers == ["google.com"] && last.createdAt == Date(timeIntervalSince1970: 1_600_000_000.123))
        #expect(
            last.passwordHash
                == "$firebase-scrypt$ln=14,r=8,p=1$Bw==$jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA==$42xEC+ixf3L2lw==$lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ==")
        // Without the parameters a password user is refused by its line, the others read.
        let without = try readAll(path, .firebase)
        #expect(without.allSatisfy { if case .failure = $0.user { true } else { false } })
    }

    @Test("a Firebase user's Google, Apple and OIDC identities keep the provider's id (rawId); other providers are listed only")
    func firebaseIdentities() throws {
        let dir = try TemporaryDirectory(prefix: "import-file")
        defer { dir.remove() }
        let text = #"{"users":[{"localId":"fbLocalId00000000000000001","email":"g@example.com","providerUserInfo":["#
            + #"{"providerId":"google.com","rawId":"1082"},{"providerId":"apple.com","rawId":"001.ab"},{"providerId":"oidc.corp","rawId":"c-7"},"#
            + #"{"providerId":"facebook.com","rawId":"fb-1"},{"providerId":"phone","rawId":"+81"},{"providerId":"google.com","rawId":"other"}]}]}"#
        let path = dir.path("firebase.json")
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        let user = try #require(try readAll(path, .firebase).first).user.get()
        #expect(user.providers == ["apple.com", "facebook.com", "google.com", "oidc.corp", "phone"])
        #expect(user.identities == [
            ImportedIdentity(provider: "apple.com", subject: "001.ab"), ImportedIdentity(provider: "google.com", subject: "1082"),
            ImportedIdentity(provider: "oidc.corp", subject: "c-7"),
        ])
    }

    @Test func notAFirebaseExportIsRefused() throws {
        let dir = try TemporaryDirectory(prefix: "import-file")
        defer { dir.remove() }
        for bad in ["[1,2]", #"{"users":[{"localId":"a"}"#] {
            let path = dir.path("bad.json")
            try Data(bad.utf8).write(to: URL(fileURLWithPath: path))
            #expect(throws: ImportLineError.self) { try readAll(path, .firebase) }
        }
    }

    @Test func jsonlLinesAreStreamedAndExportLinesReadBack() throws {
        let dir = try TemporaryDirectory(prefix: "import-file")
        defer { dir.remove() }
        let user = ImportedUser(
            id: "jsonl-user-00000000000001", email: "j@example.com", emailVerified: true, displayName: String(repeating: "é", count: 500),
            photoURL: "https://example.com/j.png", passwordHash: "$2b$04$AzTUpxHc9OS8jAz0KJzAG.AzmYKsCUwxwhKMEi5lnAojb4YNiEirK",
            providers: ["apple.com"], customClaimsJSON: #"{"a":[1,2]}"#, disabled: true, createdAt: Date(timeIntervalSince1970: 1_600_000_000.5))
        let line = UserJSONL.line(user)
        let long = #"{"displayName":""# + String(repeating: "z", count: UserImportFile.maxRecordBytes + 10) + #""}"#
        let text = Array(repeating: line, count: 2500).joined(separator: "\n") + "\n\n" + #"{"email":5}"# + "\n" + line + "\n" + long + "\n" + line
        let path = dir.path("users.jsonl")
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        let items = try readAll(path, .jsonl)
        #expect(items.count == 2504)
        #expect(items[2502].line == 2504 && (try? items[2502].user.get()) == nil && items[2503].line == 2505 && (try? items[2503].user.get()) == user)
        #expect(try items[2499].user.get() == user && items[2501].line == 2503 && (try? items[2501].user.get()) == user)
        guard case .failure(let error) = items[2500].user else { Issue.record("a number as email was read"); return }
        #expect(items[2500].line == 2502 && error.description == "email must be a string")
    }
}
