// libFuzzer entry point for ProtoCodec: decodes arbitrary bytes into a few representative message
// types (and re-encodes whatever decodes). Any crash, trap or sanitizer report is a bug; thrown
// errors are the expected outcome for malformed input. Built and run by scripts/fuzz.
import Foundation

struct FuzzNested: Codable {
    var name = ""
    var value: Int64 = 0
    var child: [FuzzNested] = []
    enum CodingKeys: Int, CodingKey { case name = 1, value, child }
}

struct FuzzScalars: Codable {
    var flag = false
    var i8: Int8 = 0
    var u16: UInt16 = 0
    var i32: Int32 = 0
    var u32: UInt32 = 0
    var i64: Int64 = 0
    var u64: UInt64 = 0
    var s32 = ZigZag<Int32>(0)
    var s64 = ZigZag<Int64>(0)
    var f32 = Fixed<UInt32>(0)
    var sf64 = Fixed<Int64>(0)
    var real32: Float = 0
    var real64: Double = 0
    var text = ""
    var blob = Data()
    var raw: [UInt8] = []
    enum CodingKeys: Int, CodingKey {
        case flag = 1, i8, u16, i32, u32, i64, u64, s32, s64, f32, sf64, real32, real64, text, blob, raw
    }
}

struct FuzzCollections: Codable {
    var ints: [Int32] = []
    var zigzags: [ZigZag<Int64>] = []
    var doubles: [Double] = []
    var flags: [Bool] = []
    var names: [String] = []
    var items: [FuzzNested] = []
    var labels: [String: String] = [:]
    var byID: [Int64: FuzzNested] = [:]
    var small: [UInt8: Int8] = [:]
    var maybe: Int32?
    var maybeNested: FuzzNested?
    var nested = FuzzNested()
    var date = Date(timeIntervalSince1970: 0)
    var dates: [Date] = []
    var id: UUID?
    enum CodingKeys: Int, CodingKey {
        case ints = 1, zigzags, doubles, flags, names, items, labels, byID, small, maybe, maybeNested, nested, date, dates, id
    }
}

func fuzzDecode<T: Codable>(_ type: T.Type, _ bytes: UnsafeRawBufferPointer) {
    guard let value = try? ProtobufDecoder().decode(type, from: bytes) else { return }
    guard let again = try? ProtobufEncoder().encode(value) else { return }
    _ = try? ProtobufDecoder().decode(type, from: again)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    fuzzDecode(FuzzScalars.self, bytes)
    fuzzDecode(FuzzCollections.self, bytes)
    fuzzDecode(FuzzNested.self, bytes)
    return 0
}
