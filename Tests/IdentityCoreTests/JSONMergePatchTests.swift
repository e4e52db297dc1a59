import IdentityCore
import Testing

@Suite struct JSONMergePatchTests {
    /// RFC 7396, Appendix A: every example (target, patch, result).
    @Test(arguments: [
        (#"{"a":"b"}"#, #"{"a":"c"}"#, #"{"a":"c"}"#),
        (#"{"a":"b"}"#, #"{"b":"c"}"#, #"{"a":"b","b":"c"}"#),
        (#"{"a":"b"}"#, #"{"a":null}"#, #"{}"#),
        (#"{"a":"b","b":"c"}"#, #"{"a":null}"#, #"{"b":"c"}"#),
        (#"{"a":["b"]}"#, #"{"a":"c"}"#, #"{"a":"c"}"#),
        (#"{"a":"c"}"#, #"{"a":["b"]}"#, #"{"a":["b"]}"#),
        (#"{"a":{"b":"c"}}"#, #"{"a":{"b":"d","c":null}}"#, #"{"a":{"b":"d"}}"#),
        (#"{"a":[{"b":"c"}]}"#, #"{"a":[1]}"#, #"{"a":[1]}"#),
        (#"["a","b"]"#, #"["c","d"]"#, #"["c","d"]"#),
        (#"{"a":"b"}"#, #"["c"]"#, #"["c"]"#),
        (#"{"a":"foo"}"#, "null", "null"),
        (#"{"a":"foo"}"#, #""bar""#, #""bar""#),
        (#"{"e":null}"#, #"{"a":1}"#, #"{"e":null,"a":1}"#),
        (#"[1,2]"#, #"{"a":"b","c":null}"#, #"{"a":"b"}"#),
        (#"{}"#, #"{"a":{"bb":{"ccc":null}}}"#, #"{"a":{"bb":{}}}"#),
    ])
    func rfc7396AppendixA(_ example: (String, String, String)) throws {
        #expect(try JSONMergePatch.apply(example.1, to: example.0) == example.2)
    }

    @Test("the RFC's section 3 example: nested merge, removal, replacement of an array")
    func rfcSection3() throws {
        let target = #"{"title":"Goodbye!","author":{"givenName":"John","familyName":"Doe"},"tags":["example","sample"],"content":"This will be unchanged"}"#
        let patch = #"{"title":"Hello!","phoneNumber":"+01-123-456-7890","author":{"familyName":null},"tags":["example"]}"#
        #expect(try JSONMergePatch.apply(patch, to: target)
            == #"{"title":"Hello!","author":{"givenName":"John"},"tags":["example"],"content":"This will be unchanged","phoneNumber":"+01-123-456-7890"}"#)
    }

    @Test("members the patch does not name come back byte for byte: numbers as written, booleans, escapes")
    func untouchedMembersKeepTheirText() throws {
        let target = #"{"n":1.50,"big":12345678901234567890,"e":-2E+3,"flag":false,"s":"a\"b\\c\u00e9\n","u":"\ud83d\ude00"}"#
        let merged = try JSONMergePatch.apply(#"{"theme":"dark"}"#, to: target)
        #expect(merged == #"{"n":1.50,"big":12345678901234567890,"e":-2E+3,"flag":false,"s":"a\"b\\cé\n","u":"😀","theme":"dark"}"#)
        // And the result reads back as the same tree.
        #expect(try JSONTree(parsing: merged) == JSONTree(parsing: target.replacingOccurrences(of: "}", with: #","theme":"dark"}"#)))
    }

    @Test(arguments: ["", "{", #"{"a":}"#, #"{"a":1,}"#, "[1,]", "01", "1.", "-", #""\x""#, "\"a\u{01}\"", #""\ud800""#, "{} x", "tru"])
    func refusesText(_ text: String) {
        #expect(throws: JSONTree.SyntaxError.self) { try JSONTree(parsing: text) }
    }

    @Test func refusesDeepNesting() {
        let deep = String(repeating: "[", count: JSONTree.maxDepth + 1) + String(repeating: "]", count: JSONTree.maxDepth + 1)
        #expect(throws: JSONTree.SyntaxError.self) { try JSONTree(parsing: deep) }
        let fine = String(repeating: "[", count: JSONTree.maxDepth) + String(repeating: "]", count: JSONTree.maxDepth)
        #expect(throws: Never.self) { try JSONTree(parsing: fine) }
    }

    @Test("a repeated member keeps its last value at the place of its first")
    func repeatedMember() throws {
        #expect(try JSONTree(parsing: #"{"a":1,"b":2,"a":3}"#).text == #"{"a":3,"b":2}"#)
    }
}

@Suite struct ProfileDocumentTests {
    @Test func settingsMergeRefusesResultsOverTheLimit() throws {
        let big = String(repeating: "x", count: UserRecord.maxSettingsBytes)
        let patch = try SettingsDocument.patch(#"{"blob":"\#(big)"}"#)
        #expect(throws: IdentityError.self) { try SettingsDocument.merged(patch, into: "{}") }
        do {
            _ = try SettingsDocument.merged(patch, into: "{}")
        } catch {
            guard case .invalidArgument(let field, let reason) = error else { throw error }
            #expect(field == "settings")
            #expect(reason.contains("16 KiB"))
        }
        // A patch that removes a member of a full document is fine.
        let full = #"{"blob":"\#(String(repeating: "y", count: UserRecord.maxSettingsBytes - 20))"}"#
        #expect(try SettingsDocument.merged(SettingsDocument.patch(#"{"blob":null}"#), into: full) == "{}")
    }

    @Test(arguments: ["[1]", "\"x\"", "null", "{", "1"])
    func settingsPatchMustBeAnObject(_ text: String) {
        #expect(throws: IdentityError.self) { try SettingsDocument.patch(text) }
    }

    @Test func defaultSettingsAreAJSONObjectOfAtMost16KiB() throws {
        #expect(try SettingsDocument.validDefault(#" { "theme" : "dark", "auto_backup": false } "#).get() == #"{"theme":"dark","auto_backup":false}"#)
        #expect(try SettingsDocument.validDefault("").get() == "{}")
        #expect(throws: SettingsDocument.DefaultRefused.self) { try SettingsDocument.validDefault("[1]").get() }
        #expect(throws: SettingsDocument.DefaultRefused.self) { try SettingsDocument.validDefault("{theme:dark}").get() }
        let big = #"{"a":"\#(String(repeating: "x", count: UserRecord.maxSettingsBytes))"}"#
        #expect(throws: SettingsDocument.DefaultRefused.self) { try SettingsDocument.validDefault(big).get() }
    }

    @Test(arguments: [
        "iss", "sub", "aud", "exp", "nbf", "iat", "jti", "sid", "auth_time", "amr", "email", "email_verified", "is_anonymous",
        "azp", "acr", "nonce", "at_hash", "c_hash", "cnf", "scope", "typ", "gatehouse", "gatehouse_role", "GatehouseTier",
    ])
    func reservedClaimNamesAreRefusedByName(_ name: String) {
        do {
            _ = try CustomClaims.validated(#"{"role":"admin","\#(name)":1}"#)
            Issue.record("\(name) accepted")
        } catch {
            guard case .invalidArgument(let field, let reason) = error else { Issue.record("\(error)"); return }
            #expect(field == "claimsJSON")
            #expect(reason.contains("`\(name)`"))
        }
    }

    @Test func customClaims() throws {
        #expect(try CustomClaims.validated(#" {"role": "admin", "tier": 2} "#) == #"{"role":"admin","tier":2}"#)
        #expect(try CustomClaims.validated("") == "")
        #expect(try CustomClaims.validated(" {} ") == "")
        #expect(throws: IdentityError.self) { try CustomClaims.validated("[1]") }
        #expect(throws: IdentityError.self) { try CustomClaims.validated("{role:admin}") }
        let exactly1000 = #"{"k":""# + String(repeating: "v", count: 1000 - 8) + #""}"#
        #expect(exactly1000.utf8.count == 1000)
        #expect(throws: Never.self) { try CustomClaims.validated(exactly1000) }
        #expect(throws: IdentityError.self) { try CustomClaims.validated(#"{"k":""# + String(repeating: "v", count: 1000 - 7) + #""}"#) }
    }
}
