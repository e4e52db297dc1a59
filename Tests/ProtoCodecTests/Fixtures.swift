import Foundation
@testable import ProtoCodec

func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined(separator: " ") }

func bytes(_ hex: String) -> [UInt8] {
    let digits = hex.filter { !$0.isWhitespace }
    var result: [UInt8] = []
    var index = digits.startIndex
    while index < digits.endIndex {
        let next = digits.index(index, offsetBy: 2)
        result.append(UInt8(digits[index..<next], radix: 16)!)
        index = next
    }
    return result
}

func encode<T: Encodable>(_ value: T) throws -> [UInt8] { try ProtobufEncoder().encode(value) }
func decode<T: Decodable>(_ type: T.Type, _ bytes: [UInt8]) throws -> T { try ProtobufDecoder().decode(type, from: bytes) }
func roundTrip<T: Codable>(_ value: T) throws -> T { try decode(T.self, try encode(value)) }

struct Test1: Codable, Equatable {
    var a: Int32
    enum CodingKeys: Int, CodingKey { case a = 1 }
}

struct Test2: Codable, Equatable {
    var b: String
    enum CodingKeys: Int, CodingKey { case b = 2 }
}

struct Test4: Codable, Equatable {
    var d: [Int32]
    enum CodingKeys: Int, CodingKey { case d = 4 }
}

struct Nested: Codable, Equatable {
    var name: String = ""
    var value: Int64 = 0
    enum CodingKeys: Int, CodingKey { case name = 1, value = 2 }
}

enum Color: String, Codable { case unspecified = "", red, green }
enum Level: Int, Codable { case zero = 0, one = 1, two = 2 }

/// Every supported kind of field.
struct Everything: Codable, Equatable {
    var bool = false
    var int = 0
    var int8: Int8 = 0
    var int16: Int16 = 0
    var int32: Int32 = 0
    var int64: Int64 = 0
    var uint: UInt = 0
    var uint8: UInt8 = 0
    var uint16: UInt16 = 0
    var uint32: UInt32 = 0
    var uint64: UInt64 = 0
    var sint32 = ZigZag<Int32>(0)
    var sint64 = ZigZag<Int64>(0)
    var fixed32 = Fixed<UInt32>(0)
    var sfixed64 = Fixed<Int64>(0)
    var float: Float = 0
    var double: Double = 0
    var string = ""
    var data = Data()
    var byteArray: [UInt8] = []
    var nested = Nested()
    var optionalInt: Int32?
    var optionalString: String?
    var optionalNested: Nested?
    var ints: [Int64] = []
    var strings: [String] = []
    var messages: [Nested] = []
    var map: [String: String] = [:]
    var intMap: [Int64: Nested] = [:]
    var color = Color.unspecified
    var level = Level.zero
    var date = Date(timeIntervalSince1970: 0)
    var uuid = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    var doubles: [Double] = []
    var bools: [Bool] = []
    var zigzags: [ZigZag<Int32>] = []
    var dates: [Date] = []
    @ZigZag var wrapped: Int64 = 0

    enum CodingKeys: Int, CodingKey {
        case bool = 1, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64
        case sint32, sint64, fixed32, sfixed64, float, double, string, data, byteArray
        case nested, optionalInt, optionalString, optionalNested, ints, strings, messages, map, intMap
        case color, level, date, uuid, doubles, bools, zigzags, dates, wrapped
    }
}
