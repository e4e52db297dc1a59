import Foundation
import Testing
@testable import ProtoCodec

@Suite("Unsupported values and other coders")
struct EncodingErrorTests {
    @Test func nonFiniteDateIsAnEncodingError() {
        struct S: Codable { var date: Date; enum CodingKeys: Int, CodingKey { case date = 1 } }
        #expect(throws: EncodingError.self) { try encode(S(date: Date(timeIntervalSinceReferenceDate: .infinity))) }
    }

    @Test func arraysOfArraysAreRejected() {
        struct S: Codable { var grid: [[Int32]]; enum CodingKeys: Int, CodingKey { case grid = 1 } }
        #expect(throws: EncodingError.self) { try encode(S(grid: [[1]])) }
    }

    @Test func customUnkeyedContainersAreRejected() {
        struct S: Codable { var tags: Set<String>; enum CodingKeys: Int, CodingKey { case tags = 1 } }
        #expect(throws: EncodingError.self) { try encode(S(tags: ["a"])) }
        // Decoding a Set fails with a DecodingError rather than trapping.
        #expect(throws: DecodingError.self) { try decode(S.self, bytes("0a 01 61")) }
    }

    @Test func unsupportedMapKeysAreRejected() {
        struct Key: Codable, Hashable { var k: Int32; enum CodingKeys: Int, CodingKey { case k = 1 } }
        struct S: Codable { var m: [Key: String]; enum CodingKeys: Int, CodingKey { case m = 1 } }
        #expect(throws: EncodingError.self) { try encode(S(m: [Key(k: 1): "x"])) }
    }

    @Test func invalidKeyInNestedContainerIsReportedAtTheEnd() {
        struct S: Encodable {
            enum CodingKeys: Int, CodingKey { case a = 1 }
            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: BadKeyWrapper.self)
                _ = c.nestedContainer(keyedBy: CodingKeys.self, forKey: BadKeyWrapper())
            }
        }
        // A key whose intValue (0) is not a valid field number.
        struct BadKeyWrapper: CodingKey {
            var stringValue: String { "bad" }
            var intValue: Int? { 0 }
            init() {}
            init?(stringValue: String) { nil }
            init?(intValue: Int) { nil }
        }
        #expect(throws: EncodingError.self) { try encode(S()) }
    }

    @Test func fieldNumberLimits() throws {
        struct Big: Codable, Equatable { var v: Int32; enum CodingKeys: Int, CodingKey { case v = 536_870_911 } }
        #expect(try roundTrip(Big(v: 3)) == Big(v: 3))
        struct TooBig: Codable { var v: Int32; enum CodingKeys: Int, CodingKey { case v = 536_870_912 } }
        #expect(throws: EncodingError.self) { try encode(TooBig(v: 1)) }
        struct Negative: Codable { var v: Int32; enum CodingKeys: Int, CodingKey { case v = -1 } }
        #expect(throws: EncodingError.self) { try encode(Negative(v: 1)) }
        #expect(throws: DecodingError.self) { try decode(Negative.self, []) }
    }

    @Test func wrappersEncodeAsBareNumbersWithJSON() throws {
        struct S: Codable, Equatable {
            var z: ZigZag<Int64>
            @Fixed var f: UInt32 = 0
        }
        var value = S(z: ZigZag(-5))
        value.f = 7
        let json = try JSONEncoder().encode(value)
        #expect(String(decoding: json, as: UTF8.self).contains("-5"))
        #expect(try JSONDecoder().decode(S.self, from: json) == value)
    }

    @Test func wrapperMessagesAtTheTopLevel() throws {
        // A single-value wrapper around a message encodes as the message itself.
        struct Wrapper: Codable, Equatable {
            var inner: Test1
            init(inner: Test1) { self.inner = inner }
            init(from decoder: any Decoder) throws { inner = try decoder.singleValueContainer().decode(Test1.self) }
            func encode(to encoder: any Encoder) throws {
                var c = encoder.singleValueContainer()
                try c.encode(inner)
            }
        }
        #expect(try encode(Wrapper(inner: Test1(a: 150))) == bytes("08 96 01"))
        #expect(try decode(Wrapper.self, bytes("08 96 01")) == Wrapper(inner: Test1(a: 150)))
    }
}
