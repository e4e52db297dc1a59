import Foundation
import GatehouseSupport
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

    @Test("9,000 new members into a 9,000-member document (with removals and changes): every member, in order")
    func largePatch() throws {
        let n = 9_000
        let target = "{" + (0..<n).map { #""t\#($0)":\#($0)"# }.joined(separator: ",") + "}"
        let patch = "{" + (0..<n).map { #""p\#($0)":\#($0)"# }.joined(separator: ",") + #","t5":null,"t7":{"x":1},"p3":null,"t5":"back"}"#
        // The reader keeps the last `t5` at the place of its first: the patch sets it, after "t4".
        var expected = (0..<n).map { i in i == 7 ? #""t7":{"x":1}"# : i == 5 ? #""t5":"back""# : #""t\#(i)":\#(i)"# }
        expected += (0..<n).filter { $0 != 3 }.map { #""p\#($0)":\#($0)"# }
        #expect(try JSONMergePatch.apply(patch, to: target) == "{" + expected.joined(separator: ",") + "}")
    }

    @Test("repeated names read as the reader reads them: in the target the last value at the first place, in the patch in order")
    func repeatedNamesInTrees() {
        let one = JSONTree.number("1"), two = JSONTree.number("2"), three = JSONTree.number("3")
        let target = JSONTree.object([JSONMember(name: "a", value: one), JSONMember(name: "b", value: two), JSONMember(name: "a", value: three)])
        let addC = JSONTree.object([JSONMember(name: "c", value: one)])
        #expect(JSONMergePatch.apply(addC, to: target).text == #"{"a":3,"b":2,"c":1}"#)
        #expect(JSONMergePatch.apply(.object([JSONMember(name: "a", value: .null)]), to: target).text == #"{"b":2}"#)
        #expect(JSONMergePatch.apply(.object([JSONMember(name: "a", value: two)]), to: target).text == #"{"a":2,"b":2}"#)
        // The patch's changes apply one after the other: set, remove, add again (at the end).
        let patch = JSONTree.object([
            JSONMember(name: "a", value: two), JSONMember(name: "a", value: .null), JSONMember(name: "a", value: .object([JSONMember(name: "x", value: one)])),
        ])
        #expect(JSONMergePatch.apply(patch, to: target).text == #"{"b":2,"a":{"x":1}}"#)
    }

    @Test("a PATCH text repeating a name: its last value, at the place of the first (deterministic)")
    func repeatedNamesInPatchText() throws {
        #expect(try JSONMergePatch.apply(#"{"a":{"x":1},"b":1,"a":null}"#, to: #"{"a":{"y":2},"c":3}"#) == #"{"c":3,"b":1}"#)
        #expect(try JSONMergePatch.apply(#"{"a":null,"b":1,"a":{"x":1}}"#, to: #"{"a":{"y":2},"c":3}"#) == #"{"a":{"y":2,"x":1},"c":3,"b":1}"#)
    }

    @Test("the writer uses the two-character escapes, so compact text is never longer than what was read")
    func shortEscapes() throws {
        let text = #"{"k":"\b\f\n\r\t\u0001\"\\"}"#
        #expect(try JSONTree(parsing: text).text == text)
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

    @Test("settings read by one set of rules: 65 levels deep is refused whole, and a stored document that deep is never replaced by {}")
    func settingsDepth() throws {
        func nested(_ depth: Int) -> String {
            String(repeating: #"{"a":"#, count: depth - 1) + "{}" + String(repeating: "}", count: depth - 1)
        }
        #expect(throws: IdentityError.self) { try SettingsDocument.validated(nested(JSONTree.maxDepth + 1)) }
        #expect(try SettingsDocument.validated(nested(JSONTree.maxDepth)) == nested(JSONTree.maxDepth))
        #expect(throws: SettingsDocument.DefaultRefused.self) { try SettingsDocument.validDefault(nested(JSONTree.maxDepth + 1)).get() }
        let patch = try SettingsDocument.patch(#"{"theme":"dark"}"#)
        do {
            let result = try SettingsDocument.merged(patch, into: nested(JSONTree.maxDepth + 1))
            Issue.record("merged into an unreadable document: \(result)")
        } catch {
            guard case .invalidArgument(let field, let reason) = error else { throw error }
            #expect(field == "settings")
            #expect(reason.contains("stored settings"), "\(reason)")
        }
        #expect(throws: IdentityError.self) { try SettingsDocument.merged(patch, into: "[1]") }
    }

    @Test("custom claims full of \\b: 999 bytes in, the same 999 bytes stored; the stored form is what is measured")
    func customClaimsWithControlEscapes() throws {
        let claims = #"{"k":""# + String(repeating: #"\b"#, count: 495) + #"x"}"#
        #expect(claims.utf8.count == 999)
        let stored = try CustomClaims.validated(claims)
        #expect(stored == claims)
        #expect(stored.utf8.count <= UserRecord.maxCustomClaimsBytes)
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
