// Swift mirrors of proto/testing.proto and the golden values of Tests/Interop/golden.py.
import Foundation
import ProtoCodec

enum GColor: Int32, Codable { case unspecified = 0, red = 1, green = 2 }

struct GNested: Codable, Equatable {
    var name = ""
    var value: Int64 = 0
    enum CodingKeys: Int, CodingKey { case name = 1, value = 2 }
}

struct GScalars: Codable, Equatable {
    var flag = false
    var i32: Int32 = 0
    var i64: Int64 = 0
    var u32: UInt32 = 0
    var u64: UInt64 = 0
    var s32 = ZigZag<Int32>(0)
    var s64 = ZigZag<Int64>(0)
    var f32 = Fixed<UInt32>(0)
    var f64 = Fixed<UInt64>(0)
    var sf32 = Fixed<Int32>(0)
    var sf64 = Fixed<Int64>(0)
    var real32: Float = 0
    var real64: Double = 0
    var text = ""
    var blob = Data()
    var color = GColor.unspecified
    enum CodingKeys: Int, CodingKey {
        case flag = 1, i32, i64, u32, u64, s32, s64, f32, f64, sf32, sf64, real32, real64, text, blob, color
    }
}

struct GCollections: Codable, Equatable {
    var ints: [Int32] = []
    var zigzags: [ZigZag<Int64>] = []
    var doubles: [Double] = []
    var flags: [Bool] = []
    var names: [String] = []
    var blobs: [Data] = []
    var items: [GNested] = []
    var labels: [String: String] = [:]
    var byID: [Int64: GNested] = [:]
    var counts: [UInt32: Int32] = [:]
    var fixeds: [Fixed<UInt32>] = []
    enum CodingKeys: Int, CodingKey {
        case ints = 1, zigzags, doubles, flags, names, blobs, items, labels, byID, counts, fixeds
    }
}

struct GEnvelope: Codable, Equatable {
    var maybeNumber: Int32?
    var maybeText: String?
    var nested = GNested()
    var createdAt = Date(timeIntervalSince1970: 0)
    var id: UUID?
    var optionalNested: GNested?
    var history: [Date] = []
    enum CodingKeys: Int, CodingKey {
        case maybeNumber = 1, maybeText, nested, createdAt, id, optionalNested, history
    }
}

/// A golden message: how to encode it, decode bytes back and compare.
struct Golden: Sendable {
    let encode: @Sendable () throws -> [UInt8]
    let decodesTo: @Sendable ([UInt8]) throws -> Bool
    /// False for messages Swift only decodes (e.g. with unknown fields it cannot reproduce).
    let swiftEncodes: Bool

    init<T: Codable & Equatable & Sendable>(_ value: T, swiftEncodes: Bool = true) {
        encode = { try ProtobufEncoder().encode(value) }
        decodesTo = { try ProtobufDecoder().decode(T.self, from: $0) == value }
        self.swiftEncodes = swiftEncodes
    }
}

extension GNested: Sendable {}
extension GScalars: Sendable {}
extension GCollections: Sendable {}
extension GEnvelope: Sendable {}

let goldenUUID = UUID(uuid: (0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1A, 0x1B, 0x1C, 0x1D, 0x1E, 0x1F))

let goldenMessages: [String: Golden] = [
    "scalars_defaults": Golden(GScalars()),
    "scalars_positive": Golden(GScalars(
        flag: true, i32: 150, i64: 1 << 40, u32: 4_000_000_000, u64: .max, s32: ZigZag(12345), s64: ZigZag(1 << 50),
        f32: Fixed(0xDEAD_BEEF), f64: Fixed((1 << 63) + 5), sf32: Fixed(7), sf64: Fixed(1 << 60), real32: 1.5,
        real64: 3.141592653589793, text: "testing", blob: Data([0x00, 0x01, 0xFE, 0xFF]), color: .green)),
    "scalars_negative": Golden(GScalars(
        i32: -1, i64: .min, s32: ZigZag(.min), s64: ZigZag(.min), sf32: Fixed(-2), sf64: Fixed(.min), real32: -0.25,
        real64: -1e300, color: .red)),
    "scalars_extremes": Golden(GScalars(
        i32: .max, i64: .max, u32: .max, s32: ZigZag(.max), s64: ZigZag(.max), f32: Fixed(.max), f64: Fixed(.max),
        sf32: Fixed(.min), real32: .greatestFiniteMagnitude, real64: .leastNonzeroMagnitude)),
    "scalars_unicode": Golden(GScalars(
        text: "héllo wörld — 日本語 🌍 \u{0} end", blob: Data((0...255).map { UInt8($0) }))),
    "collections_defaults": Golden(GCollections()),
    "collections": Golden(GCollections(
        ints: [3, 270, 86942, -1, 0, .max],
        zigzags: [0, -1, 1, ZigZag(.min), ZigZag(.max)],
        doubles: [0, -0.5, 1e10],
        flags: [true, false, true],
        names: ["", "a", "ünïcode", String(repeating: "x", count: 200)],
        blobs: [Data(), Data([1, 2])],
        items: [GNested(), GNested(name: "first", value: -7), GNested(name: String(repeating: "y", count: 150), value: 1 << 40)],
        labels: ["b": "2", "a": "1", "": "empty", "é": "accent", "z": ""],
        byID: [-5: GNested(name: "neg"), 0: GNested(), 1 << 40: GNested(value: 9)],
        counts: [0: 0, 7: -7, 4_000_000_000: 1],
        fixeds: [1, Fixed(0xFFFF_FFFF)])),
    "envelope_defaults": Golden(GEnvelope()),
    "envelope_optional_zero": Golden(GEnvelope(maybeNumber: 0, maybeText: "", optionalNested: GNested())),
    "envelope_full": Golden(GEnvelope(
        maybeNumber: -42, maybeText: "hi", nested: GNested(name: "inner", value: 99),
        createdAt: Date(timeIntervalSince1970: 1_700_000_000.25), id: goldenUUID, optionalNested: GNested(name: "opt"),
        history: [Date(timeIntervalSince1970: -0.5), Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 86_400)])),
    "unknown_fields": Golden(
        GEnvelope(maybeNumber: 5, nested: GNested(name: "n"), createdAt: Date(timeIntervalSince1970: 60), id: goldenUUID),
        swiftEncodes: false),
]
