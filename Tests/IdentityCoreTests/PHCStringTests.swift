import Foundation
import IdentityCore
import Testing

@Suite struct PHCStringTests {
    let argon = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHQxMjM0NTY3OA$AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"

    /// `decodeBase64` before it read bytes (Character properties, NSString replacing).
    static func referenceDecode(_ text: String) -> [UInt8]? {
        guard text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "+" || $0 == "/" || $0 == "." || $0 == "=") })
        else { return nil }
        var s = text.replacingOccurrences(of: ".", with: "+")
        while s.hasSuffix("=") { s.removeLast() }
        guard s.count % 4 != 1 else { return nil }
        s += String(repeating: "=", count: (4 - s.count % 4) % 4)
        return Data(base64Encoded: s).map { Array($0) }
    }

    /// `PHCString.init` before ASCII strings were split by bytes.
    static func referenceParse(_ string: String) -> PHCString? {
        guard string.utf8.count <= 1024, string.hasPrefix("$") else { return nil }
        var fields = string.split(separator: "$", omittingEmptySubsequences: false).dropFirst().map(String.init)
        guard let id = fields.first, !id.isEmpty, id.utf8.count <= 32,
            id.allSatisfy({ ($0.isASCII && ($0.isLowercase || $0.isNumber)) || $0 == "-" })
        else { return nil }
        fields.removeFirst()
        var phc = PHCString(id: id)
        if let first = fields.first, first.hasPrefix("v=") {
            guard let v = Int(first.dropFirst(2)), v >= 0 else { return nil }
            phc.version = v
            fields.removeFirst()
        }
        if let first = fields.first, first.contains("="), !first.hasSuffix("=") {
            for pair in first.split(separator: ",", omittingEmptySubsequences: false) {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else { return nil }
                phc.parameters.append(PHCString.Parameter(String(parts[0]), String(parts[1])))
            }
            fields.removeFirst()
        }
        guard fields.count <= 2 else { return nil }
        if fields.count >= 1 {
            guard let s = referenceDecode(fields[0]) else { return nil }
            phc.salt = s
        }
        if fields.count == 2 {
            guard let h = referenceDecode(fields[1]), !h.isEmpty else { return nil }
            phc.hash = h
        }
        return phc
    }

    @Test func parsesAsBeforeASCIIWasSplitByBytes() {
        var cases = [
            argon, "$scrypt$ln=16,r=8,p=1$aM15713r3Xsvxbi31lqr1Q$nFNh2CVHVjNldFVKDHDlm4CbdRSCdEBsjjJxD+iCs5E", "$", "$$", "$argon2id", "$Argon2id$x",
            "$argon2id$v=19", "$argon2id$v=-1$m=1$AA$AA", "$argon2id$m=1,t=$AA$AA", "$argon2id$m=1$AA==$AA", "$a$b$c$d", "$pbkdf2-sha256$29000$N2bs.c$T.Bd",
            "$argon2id$v=19$m=19456,t=2,p=1$c29tZQ\r\n$AAEC", "$argon2ïd$v=19$m=1$AA$AA", "$argon2id$v=19$m=é,t=1$AA$AA", "$argon2id$v=19$m=1$\u{301}AA$AA",
            "$argon2id$\u{301}v=19$m=1$AA$AA", "$x$=\u{301}$AA",
        ]
        var generator = SystemRandomNumberGenerator()
        let pieces = ["$", "=", ",", "v=19", "m=1", "t=2", "argon2id", "AA", "c29tZQ", "Q.", "==", "é", "\u{301}", "-", "9", "\r\n"]
        for _ in 0..<3000 {
            cases.append("$" + (0..<Int.random(in: 0...8, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined())
        }
        for text in cases { #expect(PHCString(text) == Self.referenceParse(text), "\(text)") }
    }

    @Test func base64DecodesAsBeforeItReadBytes() {
        var cases = [
            "", "=", "==", "A", "AA", "AAA", "AAAA", "AAAAA", "QQ", "QQ=", "QQ==", "QQ===", "QR", "QR==", "Q.", "Q.==", "a.b/", "ab.c", "A=A=",
            "AA=A", "c29tZXNhbHQxMjM0NTY3OA", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8", "é", "AA\r\nAA", "AA AA", "AA-_", "ＡＡ", "AA\u{0}",
            "٣٣٣٣", "AAAA\n",
        ]
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("ABCxyz019+/.=-_ $é")
        for _ in 0..<2000 {
            cases.append(String((0..<Int.random(in: 0...12, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }))
        }
        for text in cases { #expect(PHCString.decodeBase64(text) == Self.referenceDecode(text), "\(text)") }
    }

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
