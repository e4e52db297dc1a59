import Foundation
import IdentityCore
import Testing

@Suite struct PHCStringTests {
    let argon = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHQxMjM0NTY3OA$AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"

    @Test func parsesArgon2id() throws {
        let phc = try #require(PHCString(argon))
        #expect(phc.id == "argon2id")
        #expect(phc.version == 19)
        #expect(phc.integer("m") == 19456)
        #expect(phc.integer("t") == 2)
        #expect(phc.integer("p") == 1)
        #expect(phc.salt == Array("somesalt12345678".utf8))
        #expect(phc.hash == Array(0..<32))
    }

    @Test func formatsWhatItParsed() throws {
        #expect(try #require(PHCString(argon)).description == argon)
        let built = PHCString(id: "argon2id", version: 19, parameters: [.init("m", "64"), .init("t", "1"), .init("p", "1")],
            salt: [1, 2, 3], hash: [4, 5, 6, 7])
        #expect(PHCString(built.description) == built)
    }

    @Test func acceptsPasslibScryptWithAb64() throws {
        let phc = try #require(PHCString("$scrypt$ln=10,r=8,p=1$MDEyMzQ1Njc4OWFiY2RlZg$6g3umF.uVrJsObaTZhIbbTlgrvOEFcCItdwSjtPF67M"))
        #expect(phc.id == "scrypt")
        #expect(phc.version == nil)
        #expect(phc["ln"] == "10")
        #expect(phc.salt == Array("0123456789abcdef".utf8))
        #expect(phc.hash.count == 32)
    }

    @Test func toleratesPadding() throws {
        let phc = try #require(PHCString("$x$c2FsdA==$aGFzaA=="))
        #expect(phc.salt == Array("salt".utf8))
        #expect(phc.hash == Array("hash".utf8))
    }

    @Test(arguments: [
        "", "$", "argon2id$v=19", "$ARGON2ID$v=19", "$argon2id$v=x$m=1", "$argon2id$v=19$m=1,t$salt$hash",
        "$argon2id$v=19$m=1$c2FsdA$aGFzaA$extra", "$argon2id$v=19$m=1$not base64!$aGFzaA", "$argon2id$v=19$m=1$c2FsdA$",
        "$a$" + String(repeating: "A", count: 2000),
    ])
    func rejectsMalformed(_ text: String) {
        #expect(PHCString(text) == nil)
    }
}

@Suite struct UserIDTests {
    @Test func randomIDsAre128BitURLSafe() {
        var seen = Set<String>()
        for _ in 0..<1000 {
            let id = UserID.random().rawValue
            #expect(id.count == 22)
            #expect(UserID.isWellFormed(id))
            seen.insert(id)
        }
        #expect(seen.count == 1000)
    }

    /// A fixed sequence of draws, to pin the encoding.
    struct Sequence: RandomNumberGenerator {
        var values: [UInt64]
        mutating func next() -> UInt64 { values.removeFirst() }
    }

    @Test func randomIDsAreTheBase64URLOfTwoDraws() {
        for (high, low) in [(UInt64(0), UInt64(0)), (.max, .max), (0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210), (1 << 63, 1)] {
            var generator = Sequence(values: [high, low])
            let id = UserID.random(using: &generator).rawValue
            let bytes = withUnsafeBytes(of: high.bigEndian) { Array($0) } + withUnsafeBytes(of: low.bigEndian) { Array($0) }
            let expected = Data(bytes).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            #expect(id == expected)
        }
    }

    @Test func wellFormedRejectsMetacharacters() {
        #expect(!UserID.isWellFormed(""))
        #expect(!UserID.isWellFormed("abc'; DROP TABLE users;--"))
        #expect(!UserID.isWellFormed("abc/def"))
        #expect(!UserID.isWellFormed(String(repeating: "a", count: 65)))
    }
}
