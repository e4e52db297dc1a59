import Foundation
import Testing
@testable import ProtoCodec

@Suite("Round trips")
struct RoundTripTests {
    @Test func everythingAtExtremes() throws {
        var value = Everything()
        value.bool = true
        value.int = .min
        value.int8 = .min
        value.int16 = .max
        value.int32 = .min
        value.int64 = .max
        value.uint = .max
        value.uint8 = .max
        value.uint16 = .max
        value.uint32 = .max
        value.uint64 = .max
        value.sint32 = ZigZag(.min)
        value.sint64 = ZigZag(.max)
        value.fixed32 = Fixed(.max)
        value.sfixed64 = Fixed(.min)
        value.float = -.greatestFiniteMagnitude
        value.double = .pi
        value.string = "héllo, wörld 🌍"
        value.data = Data([0, 1, 2, 255])
        value.byteArray = [9, 8, 7]
        value.nested = Nested(name: "n", value: -5)
        value.optionalInt = 0
        value.optionalString = ""
        value.optionalNested = Nested()
        value.ints = [0, -1, .min, .max, 42]
        value.strings = ["", "a", "ü"]
        value.messages = [Nested(), Nested(name: "x", value: 1)]
        value.map = ["": "", "k": "v", "ä": "b"]
        value.intMap = [-1: Nested(name: "neg", value: 0), 0: Nested(), 7: Nested(name: "", value: 7)]
        value.color = .green
        value.level = .two
        value.date = Date(timeIntervalSince1970: 1_700_000_000.25)
        value.uuid = UUID()
        value.doubles = [0, -0.0, .infinity, 1.5]
        value.bools = [true, false, true]
        value.zigzags = [ZigZag(-1), ZigZag(0), ZigZag(.max)]
        value.dates = [Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: -86_400.5)]
        value.wrapped = -123_456_789_012
        #expect(try roundTrip(value) == value)
    }

    @Test(arguments: [Int64.min, -1, 0, 1, Int64(Int32.max), Int64.max])
    func int64Values(_ n: Int64) throws {
        struct S: Codable, Equatable { var v: Int64; var z: ZigZag<Int64>; var f: Fixed<Int64>; enum CodingKeys: Int, CodingKey { case v = 1, z, f } }
        let value = S(v: n, z: ZigZag(n), f: Fixed(n))
        #expect(try roundTrip(value) == value)
    }

    @Test(arguments: [Int32.min, -1, 0, 1, Int32.max])
    func int32Values(_ n: Int32) throws {
        struct S: Codable, Equatable { var v: Int32; var z: ZigZag<Int32>; var f: Fixed<Int32>; var p: [Int32]; enum CodingKeys: Int, CodingKey { case v = 1, z, f, p } }
        let value = S(v: n, z: ZigZag(n), f: Fixed(n), p: [n, n])
        #expect(try roundTrip(value) == value)
    }

    @Test func smallWidthsRoundTripAndRangeCheck() throws {
        struct Small: Codable, Equatable { var a: Int8; var b: UInt16; var c: [Int16]; var d: [UInt8]; enum CodingKeys: Int, CodingKey { case a = 1, b, c, d } }
        let value = Small(a: -128, b: 65535, c: [.min, .max], d: [0, 255])
        #expect(try roundTrip(value) == value)
        // 300 in field 1 does not fit Int8; 70000 in field 2 does not fit UInt16.
        #expect(throws: DecodingError.self) { try decode(Small.self, bytes("08 ac 02")) }
        #expect(throws: DecodingError.self) { try decode(Small.self, bytes("10 f0 a2 04")) }
    }

    @Test func propertyWrappersAndOptionalWrappers() throws {
        struct S: Codable, Equatable {
            @ZigZag var a: Int32 = 0
            @Fixed var b: UInt64 = 0
            var c: ZigZag<Int64>?
            enum CodingKeys: Int, CodingKey { case a = 1, b, c }
        }
        var value = S()
        value.a = -2
        value.b = 1
        value.c = ZigZag(0)
        #expect(try encode(value) == bytes("08 03 11 01 00 00 00 00 00 00 00 18 00"))
        #expect(try roundTrip(value) == value)
    }

    @Test func encodeToDataAndDecodeFromDataAndBuffer() throws {
        let value = Test2(b: "x")
        let data = try ProtobufEncoder().encodeToData(value)
        #expect(try ProtobufDecoder().decode(Test2.self, from: data) == value)
        let raw = try encode(value)
        let fromBuffer = try raw.withUnsafeBytes { try ProtobufDecoder().decode(Test2.self, from: $0) }
        #expect(fromBuffer == value)
    }

    @Test func classesWithNestedContainers() throws {
        struct Manual: Codable, Equatable {
            var x: Int32
            var inner: Int32
            var y: Int32
            enum CodingKeys: Int, CodingKey { case x = 1, inner = 2, y = 3 }
            enum InnerKeys: Int, CodingKey { case v = 1 }
            init(x: Int32, inner: Int32, y: Int32) { self.x = x; self.inner = inner; self.y = y }
            init(from decoder: any Decoder) throws {
                let c = try decoder.container(keyedBy: CodingKeys.self)
                x = try c.decode(Int32.self, forKey: .x)
                inner = try c.nestedContainer(keyedBy: InnerKeys.self, forKey: .inner).decode(Int32.self, forKey: .v)
                y = try c.decode(Int32.self, forKey: .y)
            }
            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(x, forKey: .x)
                var n = c.nestedContainer(keyedBy: InnerKeys.self, forKey: .inner)
                try n.encode(inner, forKey: .v)
                try c.encode(y, forKey: .y)
            }
        }
        let value = Manual(x: 1, inner: 2, y: 3)
        #expect(try encode(value) == bytes("08 01 12 02 08 02 18 03"))
        #expect(try roundTrip(value) == value)
    }

    @Test func missingIntValueKeyNamesTheType() throws {
        struct NoNumbers: Codable { var name = "x" }
        do {
            _ = try encode(NoNumbers())
            Issue.record("expected an error")
        } catch let EncodingError.invalidValue(_, context) {
            #expect(context.debugDescription.contains("NoNumbers.CodingKeys"))
            #expect(context.debugDescription.contains("name"))
            #expect(context.codingPath.last?.stringValue == "name")
        }
        do {
            _ = try decode(NoNumbers.self, bytes("08 01"))
            Issue.record("expected an error")
        } catch let DecodingError.dataCorrupted(context) {
            #expect(context.debugDescription.contains("NoNumbers.CodingKeys"))
            #expect(context.codingPath.last?.stringValue == "name")
        }
    }

    @Test func topLevelMustBeAMessage() {
        #expect(throws: EncodingError.self) { try encode(5) }
        #expect(throws: DecodingError.self) { try decode([Int].self, []) }
    }
}
