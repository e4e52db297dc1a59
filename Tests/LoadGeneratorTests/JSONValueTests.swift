import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing
@testable import LoadGenerator

@Suite("JSON reader")
struct JSONValueTests {
    func parse(_ text: String) -> JSONValue? { try? JSONValue.parse(Array(text.utf8)) }

    @Test func values() throws {
        let value = parse(#" {"s":"a\"b\\c\/\n\u00e9\ud83d\ude00","n":[0,-0.5,1e3,12.25E-1],"t":true,"f":false,"z":null,"o":{}} "#)
        #expect(value?["s"]?.string == "a\"b\\c/\né😀")
        #expect(value?["n"] == .array([.number(0), .number(-0.5), .number(1000), .number(1.225)]))
        #expect(value?["t"] == .bool(true))
        #expect(value?["f"] == .bool(false))
        #expect(value?["z"] == .null)
        #expect(value?["o"] == .object([:]))
        #expect(parse("\"héllo\"") == .string("héllo"))
        #expect(parse("[]") == .array([]))
    }

    @Test(arguments: [
        "", " ", "{", "{\"a\":1,}", "[1 2]", "[1,]", "{a:1}", "{\"a\" 1}", "\"\\x\"", "\"\\ud800\"", "\"\\udc00\"",
        "\"\\ud800\\u0041\"", "\"\\u12\"", "01", "1.", "-", ".5", "1e", "tru", "nul", "[1] x", "\"a\tb\"", "\"unterminated",
        "{\"a\":1}}", "+1", "NaN", "[\"a\",]",
    ])
    func invalidDocumentsAreRefused(text: String) {
        #expect(parse(text) == nil, "accepted: \(text.debugDescription)")
    }

    @Test func invalidUTF8AndDepth() {
        #expect((try? JSONValue.parse([0x22, 0xFF, 0x22])) == nil)
        #expect((try? JSONValue.parse([0x22, 0x5C, 0x6E, 0xC3, 0x22])) == nil)
        #expect(parse(String(repeating: "[", count: 64) + String(repeating: "]", count: 64)) != nil)
        #expect(parse(String(repeating: "[", count: 65) + String(repeating: "]", count: 65)) == nil)
    }

    @Test func agreesWithJSONSerializationOnMutations() throws {
        // Random single-byte mutations of a realistic body: never a crash, and whatever both
        // parsers accept, they read alike (strings and numbers compared through Foundation).
        let base = Array(#"{"user":{"id":"u_1","email":"a@example.com","emailVerified":false,"settings":{"k":[1,2.5,"x"]}},"session":{"accessToken":"eyJ.a.b","expiresIn":900}}"#.utf8)
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array(#"{}[]:,"\ 0123456789.eE+-tfnulrsa"#.utf8) + [0x00, 0x7F, 0xC3, 0xFF]
        var bothAccepted = 0
        for _ in 0..<3000 {
            var bytes = base
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                bytes[Int.random(in: 0..<bytes.count, using: &generator)] = alphabet.randomElement(using: &generator)!
            }
            let ours = try? JSONValue.parse(bytes)
            let foundation = try? JSONSerialization.jsonObject(with: Data(bytes))
            if let ours, let foundation {
                bothAccepted += 1
                #expect(Self.same(ours, foundation), "\(String(decoding: bytes, as: UTF8.self))")
            }
        }
        #expect(bothAccepted > 0)
    }

    static func same(_ value: JSONValue, _ object: Any) -> Bool {
        switch value {
        case .object(let members):
            guard let dictionary = object as? [String: Any], dictionary.count == members.count else { return false }
            return members.allSatisfy { key, member in dictionary[key].map { same(member, $0) } ?? false }
        case .array(let elements):
            guard let array = object as? [Any], array.count == elements.count else { return false }
            return zip(elements, array).allSatisfy { same($0, $1) }
        case .string(let text): return (object as? String) == text
        case .number(let number): return (object as? NSNumber).map { $0.doubleValue == number } ?? false
        case .bool(let flag): return (object as? NSNumber).map { $0.boolValue == flag } ?? false
        case .null: return object is NSNull
        }
    }
}
