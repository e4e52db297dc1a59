import IdentityCore
import Testing

@Suite struct EmailAddressTests {
    @Test func trimsAndNormalizesCase() throws {
        let email = try EmailAddress("  Alice.Smith+tag@Example.COM \n")
        #expect(email.typed == "Alice.Smith+tag@Example.COM")
        #expect(email.normalized == "alice.smith+tag@example.com")
    }

    @Test func addressesDifferingInCaseNormalizeAlike() throws {
        #expect(try EmailAddress("BOB@example.org").normalized == EmailAddress("bob@EXAMPLE.org").normalized)
    }

    @Test(arguments: [
        "o'brien@example.com", "x@a.io", "user@bücher.de", "用户@例子.广告", "a.b-c_d@sub-domain.example.co.uk",
        "!#$%&'*+-/=?^_`{|}~@example.com",
    ])
    func acceptsValid(_ text: String) throws {
        _ = try EmailAddress(text)
    }

    @Test func internationalizedDomainIsNFKCAndLowercased() throws {
        // Fullwidth letters fold to ASCII under NFKC.
        let email = try EmailAddress("a@ＥＸＡＭＰＬＥ.com")
        #expect(email.normalized == "a@example.com")
        #expect(try EmailAddress("A@Bücher.DE").normalized == "a@bücher.de")
    }

    @Test(arguments: [
        "", "   ", "plainaddress", "@example.com", "user@", "user@@example.com", "a@b@example.com",
        "user name@example.com", "user@exam ple.com", "user\u{0}@example.com", "user\t@example.com",
        "user@example.com\u{7}", "user\u{200B}@example.com", "user\u{FFFD}@example.com", ".user@example.com",
        "user.@example.com", "us..er@example.com", "user@-example.com", "user@example-.com", "user@example..com",
        "user@localhost", "user@example.123", "\"quoted\"@example.com", "user@[127.0.0.1]",
        "'; DROP TABLE users;--@example.com", "user@example.com;DELETE", "a(b)@example.com", "user@exa_mple.com",
    ])
    func rejectsInvalid(_ text: String) {
        #expect(throws: IdentityError.self) { try EmailAddress(text) }
    }

    @Test func enforcesRFC5321Lengths() throws {
        let local64 = String(repeating: "a", count: 64)
        _ = try EmailAddress("\(local64)@example.com")
        #expect(throws: IdentityError.self) { try EmailAddress("a\(local64)@example.com") }
        // 254 octets total is fine, 255 is not.
        let label = String(repeating: "b", count: 63)
        let domain250 = "\(label).\(label).\(label).\(String(repeating: "c", count: 57)).com"  // 63*3+3+57+4 = 253
        #expect(domain250.utf8.count == 253)
        #expect(throws: IdentityError.self) { try EmailAddress("ab@\(domain250)") }  // 256
        let domain251 = String(domain250.dropFirst(2))  // 251 octets
        _ = try EmailAddress("a@\(domain251)")  // 253
        #expect(throws: IdentityError.self) { try EmailAddress("abc@\(domain251)") }  // 255
        // Multi-byte characters count as octets.
        let local = String(repeating: "é", count: 33)  // 66 octets
        #expect(throws: IdentityError.self) { try EmailAddress("\(local)@example.com") }
        #expect(throws: IdentityError.self) { try EmailAddress(String(repeating: "a", count: 1_000_000) + "@example.com") }
    }

    @Test func errorCodeIsInvalidEmail() {
        do {
            _ = try EmailAddress("nope")
            Issue.record("accepted")
        } catch let error as IdentityError {
            guard case .invalidEmail = error else { Issue.record("unexpected \(error)"); return }
        } catch {
            Issue.record("unexpected \(error)")
        }
    }
}
