import Foundation
import Testing
@testable import ProtoCodec

@Suite("Known byte vectors and proto3 defaults")
struct VectorTests {
    @Test func specVarint150() throws {
        #expect(try encode(Test1(a: 150)) == bytes("08 96 01"))
        #expect(try decode(Test1.self, bytes("08 96 01")) == Test1(a: 150))
    }

    @Test func specString() throws {
        #expect(try encode(Test2(b: "testing")) == bytes("12 07 74 65 73 74 69 6e 67"))
        #expect(try decode(Test2.self, bytes("12 07 74 65 73 74 69 6e 67")) == Test2(b: "testing"))
    }

    @Test func specPacked() throws {
        #expect(try encode(Test4(d: [3, 270, 86942])) == bytes("22 06 03 8E 02 9E A7 05"))
        #expect(try decode(Test4.self, bytes("22 06 03 8E 02 9E A7 05")) == Test4(d: [3, 270, 86942]))
    }

    @Test func unpackedAndMixedRepeatedAccepted() throws {
        #expect(try decode(Test4.self, bytes("20 03 20 8E 02 20 9E A7 05")).d == [3, 270, 86942])
        #expect(try decode(Test4.self, bytes("20 03 22 02 8E 02 20 9E A7 05")).d == [3, 270, 86942])
    }

    @Test func negativeInt32IsTenBytes() throws {
        #expect(try encode(Test1(a: -1)) == bytes("08 ff ff ff ff ff ff ff ff ff 01"))
        #expect(try decode(Test1.self, bytes("08 ff ff ff ff ff ff ff ff ff 01")).a == -1)
    }

    @Test func zigZagVectors() throws {
        struct S: Codable { var v: ZigZag<Int32>; enum CodingKeys: Int, CodingKey { case v = 1 } }
        #expect(try encode(S(v: -1)) == bytes("08 01"))
        #expect(try encode(S(v: 1)) == bytes("08 02"))
        #expect(try encode(S(v: -2)) == bytes("08 03"))
        #expect(try encode(S(v: ZigZag(Int32.min))) == bytes("08 ff ff ff ff 0f"))
    }

    @Test func defaultsAreOmitted() throws {
        var value = Everything()
        value.nested = Nested()
        // Only non-optional messages (nested = 21, date = 32, both empty) and the UUID (33, always
        // 16 bytes) are written.
        #expect(try encode(value) == bytes("aa 01 00 82 02 00 8a 02 10") + [UInt8](repeating: 0, count: 16))
        #expect(try decode(Everything.self, []) == Everything())
    }

    @Test func presentOptionalAtDefaultIsWritten() throws {
        struct S: Codable, Equatable {
            var a: Int32?
            var b: String?
            var c: Bool?
            enum CodingKeys: Int, CodingKey { case a = 1, b, c }
        }
        #expect(try encode(S(a: 0, b: "", c: false)) == bytes("08 00 12 00 18 00"))
        #expect(try encode(S()) == [])
        #expect(try roundTrip(S(a: 0, b: "", c: false)) == S(a: 0, b: "", c: false))
        #expect(try roundTrip(S()) == S())
    }

    @Test func lastScalarWinsAndMessagesLastWins() throws {
        #expect(try decode(Test1.self, bytes("08 01 08 02")).a == 2)
        struct Outer: Codable { var n: Nested; enum CodingKeys: Int, CodingKey { case n = 1 } }
        let outer = try decode(Outer.self, bytes("0a 03 0a 01 61 0a 02 10 05"))
        #expect(outer.n == Nested(name: "", value: 5))
    }

    @Test func unknownFieldsAreSkipped() throws {
        // field 2 varint, field 3 fixed64, field 4 bytes, field 5 fixed32, then field 1.
        let input = bytes("10 96 01 19 01 02 03 04 05 06 07 08 22 02 aa bb 2d 01 02 03 04 08 07")
        #expect(try decode(Test1.self, input).a == 7)
    }

    @Test func mapsAreSortedEntriesWithKeyAndValue() throws {
        struct M: Codable, Equatable {
            var m: [String: Int32]
            enum CodingKeys: Int, CodingKey { case m = 1 }
        }
        let encoded = try encode(M(m: ["b": 0, "a": 1]))
        #expect(encoded == bytes("0a 05 0a 01 61 10 01 0a 05 0a 01 62 10 00"))
        #expect(try decode(M.self, encoded) == M(m: ["b": 0, "a": 1]))
        // Python protobuf's deterministic order: prefixes after longer keys, "" last.
        let strings = ["x", "", "xy", "ab", "b", "é"].sorted { $0.protoPrecedes($1) }
        #expect(strings == ["ab", "b", "xy", "x", "é", ""])
        // Integers: descending as unsigned bit patterns (negatives first, 0 last).
        let ints: [Int64] = [0, 1, -1, .min, .max, 300, -2].sorted { $0.protoPrecedes($1) }
        #expect(ints == [-1, -2, .min, .max, 300, 1, 0])
    }

    @Test func dateAndUUIDEncoding() throws {
        struct S: Codable, Equatable {
            var date: Date
            var id: UUID
            enum CodingKeys: Int, CodingKey { case date = 1, id }
        }
        let id = UUID(uuidString: "00112233-4455-6677-8899-AABBCCDDEEFF")!
        let value = S(date: Date(timeIntervalSince1970: 1.5), id: id)
        let encoded = try encode(value)
        #expect(encoded == bytes("0a 08 08 01 10 80 ca b5 ee 01 12 10 00 11 22 33 44 55 66 77 88 99 aa bb cc dd ee ff"))
        #expect(try decode(S.self, encoded) == value)
        // Negative times normalize to a negative second and positive nanos.
        let before = S(date: Date(timeIntervalSince1970: -0.5), id: id)
        #expect(Array(try encode(before).prefix(16)) == bytes("0a 11 08 ff ff ff ff ff ff ff ff ff 01 10 80 ca"))
        #expect(try roundTrip(before) == before)
    }

    /// A Timestamp of whole milliseconds or microseconds comes back byte for byte after a decode to
    /// `Date` and a re-encode, although a `Double` near today resolves only about 0.1 µs.
    @Test func wholeMillisecondsAndMicrosecondsSurviveADateRoundTrip() throws {
        struct Timestamp: Codable { var seconds: Int64; var nanos: Int32; enum CodingKeys: Int, CodingKey { case seconds = 1, nanos } }
        struct Raw: Codable { var t: Timestamp; enum CodingKeys: Int, CodingKey { case t = 1 } }
        struct Dated: Codable, Equatable { var t: Date; enum CodingKeys: Int, CodingKey { case t = 1 } }
        let cases: [(Int64, Int32)] = [
            (1_700_000_001, 1_000_000), (1_709_592_287, 112_000_000), (1_700_000_000, 999_000_000),
            (4_102_444_800, 123_000), (1_700_000_000, 999_999_000), (-1, 1_000_000), (1, 1_000),
        ]
        for (seconds, nanos) in cases {
            let wire = try encode(Raw(t: Timestamp(seconds: seconds, nanos: nanos)))
            let date = try decode(Dated.self, wire)
            #expect(try encode(date) == wire, "\(seconds) s \(nanos) ns")
        }
        // A Date between two whole microseconds keeps its nanoseconds and still round-trips.
        let precise = Dated(t: Date(timeIntervalSince1970: 1_700_000_000.123_456_7))
        #expect(try roundTrip(precise) == precise)
        #expect(try encode(precise) != encode(Dated(t: Date(timeIntervalSince1970: 1_700_000_000.123_457))))
    }

    @Test func emptyNestedMessageIsWrittenAndAbsentDecodesToDefaults() throws {
        struct Outer: Codable, Equatable { var n: Nested; enum CodingKeys: Int, CodingKey { case n = 3 } }
        #expect(try encode(Outer(n: Nested())) == bytes("1a 00"))
        #expect(try decode(Outer.self, []) == Outer(n: Nested()))
    }

    @Test func longNestedLengthIsBackPatched() throws {
        struct Outer: Codable, Equatable { var n: Nested; var after: Int32; enum CodingKeys: Int, CodingKey { case n = 1, after } }
        let value = Outer(n: Nested(name: String(repeating: "x", count: 300), value: 1), after: 9)
        let encoded = try encode(value)
        #expect(Array(encoded.prefix(3)) == bytes("0a b1 02"))
        #expect(try decode(Outer.self, encoded) == value)
    }

    @Test func containsAndDecodeIfPresent() throws {
        struct Probe: Decodable {
            var hasA: Bool
            var hasB: Bool
            var a: Int32?
            var b: Int32
            enum CodingKeys: Int, CodingKey { case a = 1, b }
            init(from decoder: any Decoder) throws {
                let c = try decoder.container(keyedBy: CodingKeys.self)
                hasA = c.contains(.a)
                hasB = c.contains(.b)
                a = try c.decodeIfPresent(Int32.self, forKey: .a)
                b = try c.decode(Int32.self, forKey: .b)
            }
        }
        let probe = try decode(Probe.self, bytes("08 00"))
        #expect(probe.hasA && !probe.hasB && probe.a == 0 && probe.b == 0)
    }
}
