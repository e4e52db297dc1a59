import Foundation
import GatehouseSupport
import Testing

/// The server's one JSON reader: the grammar, its limits, and its three entry points.
@Suite("JSONReader")
struct JSONReaderTests {
    /// The compact text of what `text` reads as, or the error ("reason at byte N").
    static func read(_ text: String, _ options: JSONReader.Options = .strict) -> String {
        do { return try JSONTree(parsing: text, options: options).text } catch { return "\(error)" }
    }

    @Test("malformed text is refused with the reason and the byte where reading stopped", arguments: [
        ("", "expected a value at byte 0"),
        ("   ", "expected a value at byte 3"),
        ("{", "expected a member name at byte 1"),
        (#"{"a" 1}"#, "expected ':' at byte 5"),
        (#"{"a":1 "b":2}"#, "expected ',' or '}' at byte 7"),
        (#"{"a":1,}"#, "expected a member name at byte 7"),
        ("[1,]", "expected a value at byte 3"),
        ("[1 2]", "expected ',' or ']' at byte 3"),
        ("{a:1}", "expected a member name at byte 1"),
        ("tru", "expected true at byte 0"),
        ("nul", "expected null at byte 0"),
        ("falsy", "expected false at byte 0"),
        ("1 2", "unexpected text after the value at byte 2"),
        (#""abc"#, "unterminated string at byte 4"),
        (#""ab\"#, "unterminated escape at byte 4"),
        ("\"a\tb\"", "control character in a string at byte 2"),
        (#""\x""#, "unknown escape at byte 3"),
        (#""\u12x4""#, "expected a hex digit at byte 5"),
        (#""\u12""#, "expected four hex digits at byte 3"),
        ("'a'", "expected a value at byte 0"),
        ("{\"a\":1}}", "unexpected text after the value at byte 7"),
    ])
    func malformed(text: String, error: String) {
        #expect(Self.read(text) == error, "\(text)")
    }

    @Test("a repeated name keeps its last value at the place of its first, or is refused")
    func repeatedNames() throws {
        #expect(Self.read(#"{"a":1,"b":2,"a":3}"#) == #"{"a":3,"b":2}"#)
        // Past eight members the reader keeps a table of names: the same outcome.
        let many = (0..<12).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        #expect(Self.read("{\(many),\"k3\":\"x\",\"k11\":null}") == "{" + many.replacingOccurrences(of: "\"k3\":3", with: "\"k3\":\"x\"")
            .replacingOccurrences(of: "\"k11\":11", with: "\"k11\":null") + "}")
        var refusing = JSONReader.Options.strict
        refusing.repeatedNames = .refused
        #expect(Self.read(#"{"a":1,"b":{"c":1,"c":2}}"#, refusing) == "repeated member name at byte 18")
        #expect(Self.read("{\(many),\"k10\":0}", refusing).hasPrefix("repeated member name"))
        #expect(Self.read(#"{"a":1,"b":{"c":1,"d":2}}"#, refusing) == #"{"a":1,"b":{"c":1,"d":2}}"#)
        // Names compare as Swift strings do: "é" precomposed and decomposed are one name.
        #expect(Self.read("{\"\u{E9}\":1,\"e\u{301}\":2}") == "{\"\u{E9}\":2}")
    }

    @Test("nesting is limited: the top-level array or object is depth 1")
    func depth() {
        func nested(_ n: Int) -> String { String(repeating: "[", count: n) + String(repeating: "]", count: n) }
        #expect(JSONTree.maxDepth == 64)
        #expect(Self.read(nested(64)) == nested(64))
        #expect(Self.read(nested(65)) == "nested deeper than 64 at byte 64")
        #expect(Self.read(#"{"a":{"b":{}}}"#, JSONReader.Options(maxDepth: 2)) == "nested deeper than 2 at byte 10")
        #expect(Self.read(#"{"a":{"b":1}}"#, JSONReader.Options(maxDepth: 2)) == #"{"a":{"b":1}}"#)
        #expect(Self.read(nested(512), .foundation) == nested(512))
        #expect(Self.read(nested(513), .foundation) == "nested deeper than 512 at byte 512")
        // Far deeper than the limit: refused, not a stack overflow.
        #expect(Self.read(nested(100_000)).hasPrefix("nested deeper than 64"))
    }

    @Test("a size limit, when set, is checked before reading")
    func size() {
        var options = JSONReader.Options.strict
        options.maxBytes = 8
        #expect(Self.read(#"{"a":12}"#, options) == #"{"a":12}"#)
        #expect(Self.read(#"{"a":123}"#, options) == "larger than 8 bytes at byte 8")
    }

    @Test("escapes are decoded and written back in the shortest form")
    func escapes() throws {
        let tree = try JSONTree(parsing: #""\"\\\/\b\f\n\r\t\u0041\u00e9\u4E2D\u0001""#)
        #expect(tree == .string("\"\\/\u{08}\u{0C}\n\r\tA\u{E9}\u{4E2D}\u{01}"))
        #expect(tree.text == #""\"\\/\b\f\n\r\tAé中\u0001""#)
    }

    @Test("surrogate pairs make one scalar; a lone surrogate is refused", arguments: [
        (#""\ud83d\ude42""#, "\"🙂\""),
        (#""\uD83D\uDE42x""#, "\"🙂x\""),
        (#""\ud83d""#, "lone surrogate in a \\u escape at byte 7"),
        (#""\ud83dx""#, "lone surrogate in a \\u escape at byte 7"),
        (#""\ud83d\u0041""#, "lone surrogate in a \\u escape at byte 13"),
        (#""\ud83d\ud83d""#, "lone surrogate in a \\u escape at byte 13"),
        (#""\ude42""#, "lone surrogate in a \\u escape at byte 7"),
        (#""\ud83d\n""#, "lone surrogate in a \\u escape at byte 7"),
    ])
    func surrogates(text: String, expected: String) {
        #expect(Self.read(text) == expected)
    }

    @Test("numbers are kept as written", arguments: ["0", "-0", "1", "-12", "1.5", "1.50", "1e3", "1E+3", "-2.5e-07", "123456789012345678901234567890"])
    func numbers(text: String) throws {
        #expect(try JSONTree(parsing: text) == .number(text))
        #expect(try JSONTree(parsing: "[\(text)]").text == "[\(text)]")
    }

    @Test("malformed numbers are refused", arguments: [
        ("-", "expected a digit at byte 1"), ("+1", "expected a value at byte 0"), (".5", "expected a value at byte 0"),
        ("1.", "expected a digit after '.' at byte 2"), ("1e", "expected a digit in the exponent at byte 2"),
        ("1e+", "expected a digit in the exponent at byte 3"), ("01", "unexpected text after the value at byte 1"),
        ("-a", "expected a digit at byte 1"), ("0x10", "unexpected text after the value at byte 1"),
    ])
    func malformedNumbers(text: String, error: String) {
        #expect(Self.read(text) == error)
    }

    @Test("invalid UTF-8 in a string is refused")
    func invalidUTF8() throws {
        for bytes: [UInt8] in [[0x22, 0xFF, 0x22], [0x22, 0xC3, 0x28, 0x22], [0x22, 0x5C, 0x6E, 0xED, 0xA0, 0x80, 0x22]] {
            #expect(throws: JSONTree.SyntaxError.self) { try JSONTree(parsing: bytes) }
            #expect(JSONReader.flatStrings([0x7B, 0x22, 0x61, 0x22, 0x3A] + bytes + [0x7D]) == nil)
        }
        #expect(try JSONTree(parsing: Array("\"caf\u{E9}\"".utf8)) == .string("caf\u{E9}"))
    }

    @Test("Foundation's leniencies only where asked: trailing commas, a byte order mark, no top-level scalar")
    func foundationOptions() {
        #expect(Self.read(#"{"a":[1,2,],}"#, .foundation) == #"{"a":[1,2]}"#)
        #expect(Self.read(#"{"a":1,,}"#, .foundation) == "expected a member name at byte 7")
        #expect(Self.read("[,]", .foundation) == "expected a value at byte 1")
        #expect(Self.read("\u{FEFF} [1]", .foundation) == "[1]")
        #expect(Self.read("\u{FEFF}[1]").hasPrefix("expected a value at byte 0"))
        #expect(Self.read("5", .foundation) == "expected an object or an array at byte 0")
        #expect(Self.read(#""s""#, .foundation) == "expected an object or an array at byte 0")
    }

    @Test("the members of a top-level object come with the byte range of each value")
    func objectMembers() throws {
        let text = Array(#" {"a" : {"x": [1, 2]} , "b":"q\"", "a":  null } "#.utf8)
        let members = try #require(try JSONReader.objectMembers(in: text))
        #expect(members.map(\.name) == ["a", "b"])
        #expect(members.map { String(decoding: text[$0.range], as: UTF8.self) } == ["null", #""q\"""#])
        #expect(members[1].value == .string("q\""))
        let unbuilt = try #require(try JSONReader.objectMembers(in: text, values: false))
        #expect(unbuilt.map(\.range) == members.map(\.range))
        #expect(unbuilt.allSatisfy { $0.value == .null })
        #expect(try JSONReader.objectMembers(in: Array("[1]".utf8)) == nil)
        #expect(throws: JSONTree.SyntaxError.self) { try JSONReader.objectMembers(in: Array(#"{"a":[1,]}"#.utf8), values: false) }
        #expect(throws: JSONTree.SyntaxError.self) { try JSONReader.objectMembers(in: Array(#"{"a":"\ud800"}"#.utf8), values: false) }
    }

    @Test("flat objects of strings and nulls, and nothing else", arguments: [
        (#" { "email" : "a@b.c" , "password":"p\"w" , "name": null } "#, true),
        ("{}", true), (#"{"a":1}"#, false), (#"{"a":"b","a":"c"}"#, false), (#"{"a":"b",}"#, false), (#"["a"]"#, false),
        (#"{"a":{"b":"c"}}"#, false), (#"{"a":"b"} x"#, false), (#"{"a":nul}"#, false), ("", false),
    ])
    func flatStrings(text: String, flat: Bool) throws {
        let parsed = JSONReader.flatStrings(Array(text.utf8))
        #expect((parsed != nil) == flat, "\(text)")
        guard let parsed else { return }
        let reference = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(parsed.count == reference.count)
        for (name, value) in reference { #expect(parsed[name] == .some(value as? String), "\(name)") }
    }

    @Test("a flat object has at most maxMembers members")
    func flatMemberLimit() {
        let object = { (n: Int) in Array(("{" + (0..<n).map { "\"k\($0)\":\"v\"" }.joined(separator: ",") + "}").utf8) }
        #expect(JSONReader.flatStrings(object(16))?.count == 16)
        #expect(JSONReader.flatStrings(object(17)) == nil)
        #expect(JSONReader.flatStrings(object(3), maxMembers: 2) == nil)
    }

    /// SplitMix64: the same corpus on every run.
    struct SeededGenerator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    @Test("with .foundation the reader accepts what Foundation's JSONSerialization accepts, on a corpus of small texts")
    func agreesWithFoundation() {
        let pieces = ["{", "}", "[", "]", ",", ":", "\"a\"", "1", "-", "0", ".", "e", "true", "null", " ", "\"\\u00e9\"", "\"\\q\""]
        var generator = SeededGenerator(state: 36)
        var checked = 0
        for _ in 0..<20_000 {
            let text = (0..<Int.random(in: 1...8, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
            let ours = (try? JSONTree(parsing: text, options: .foundation)) != nil
            let foundation = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) != nil
            #expect(ours == foundation, "\(text)")
            checked += ours ? 1 : 0
        }
        #expect(checked > 0)
    }
}
