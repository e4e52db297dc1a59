import Foundation
import Testing
@testable import ProtoCodec

/// Runs `body` and returns the DecodingError it throws (recording an issue otherwise).
func decodingError(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> DecodingError? {
    do {
        try body()
        Issue.record("expected a DecodingError", sourceLocation: sourceLocation)
    } catch let error as DecodingError {
        return error
    } catch {
        Issue.record("expected a DecodingError, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

func path(of error: DecodingError?) -> [String] {
    switch error {
    case .dataCorrupted(let c)?, .typeMismatch(_, let c)?, .keyNotFound(_, let c)?, .valueNotFound(_, let c)?:
        return c.codingPath.map(\.stringValue)
    default: return []
    }
}

struct Outer: Codable, Equatable {
    var id: Int32 = 0
    var inner = Nested()
    var items: [Nested] = []
    enum CodingKeys: Int, CodingKey { case id = 1, inner = 2, items = 3 }
}

/// A self-recursive message for the depth limit.
final class Chain: Codable {
    var next: Chain?
    init(next: Chain?) { self.next = next }
    enum CodingKeys: Int, CodingKey { case next = 1 }
    static func depth(_ n: Int) -> Chain {
        var chain = Chain(next: nil)
        for _ in 0..<n { chain = Chain(next: chain) }
        return chain
    }
}

@Suite("Malformed input")
struct MalformedTests {
    @Test func truncatedVarint() {
        #expect(decodingError { _ = try decode(Test1.self, bytes("08 96")) } != nil)
        #expect(decodingError { _ = try decode(Test1.self, bytes("88")) } != nil)
    }

    @Test func varintLongerThanTenBytes() {
        #expect(decodingError { _ = try decode(Test1.self, bytes("08 ff ff ff ff ff ff ff ff ff ff 01")) } != nil)
    }

    @Test func lengthPastTheEnd() {
        #expect(decodingError { _ = try decode(Test2.self, bytes("12 08 74 65")) } != nil)
    }

    @Test func twoGigabyteLengthPrefixThrowsWithoutAllocating() {
        // Field 2, length 2^31, in a 10-byte message.
        let input = bytes("12 80 80 80 80 08 00 00 00 00")
        #expect(decodingError { _ = try decode(Test2.self, input) } != nil)
        #expect(decodingError { _ = try decode(Test4.self, bytes("22 80 80 80 80 08 00 00 00")) } != nil)
        #expect(decodingError { _ = try decode(Everything.self, bytes("ea 01 ff ff ff ff 0f 00")) } != nil)
    }

    @Test func wrongWireTypeHasCodingPath() {
        // Field 1 of Outer as length-delimited where an int32 is expected.
        let error = decodingError { _ = try decode(Outer.self, bytes("0a 01 00")) }
        guard case .typeMismatch? = error else { Issue.record("expected typeMismatch, got \(String(describing: error))"); return }
        #expect(path(of: error) == ["id"])
        // Nested: inner.value (field 2 of field 2) as fixed32.
        let nested = decodingError { _ = try decode(Outer.self, bytes("12 05 15 01 02 03 04")) }
        #expect(path(of: nested) == ["inner", "value"])
        // A message field sent as a varint.
        #expect(path(of: decodingError { _ = try decode(Outer.self, bytes("10 01")) }) == ["inner"])
        // Inside a repeated message: items[1].name has invalid UTF-8.
        let inItems = decodingError { _ = try decode(Outer.self, bytes("1a 00 1a 03 0a 01 ff")) }
        #expect(path(of: inItems) == ["items", "Index 1", "name"])
    }

    @Test func invalidUTF8() {
        let error = decodingError { _ = try decode(Test2.self, bytes("12 02 c3 28")) }
        guard case .dataCorrupted(let context)? = error else { Issue.record("expected dataCorrupted"); return }
        #expect(context.debugDescription.contains("UTF-8"))
        #expect(path(of: error) == ["b"])
    }

    @Test func fieldNumberZeroAndGroups() {
        #expect(decodingError { _ = try decode(Test1.self, bytes("00 01")) } != nil)
        #expect(decodingError { _ = try decode(Test1.self, bytes("0b 0c")) } != nil)
        #expect(decodingError { _ = try decode(Test1.self, bytes("0f")) } != nil)
    }

    @Test func depthLimit() throws {
        let deep = try encode(Chain.depth(70))
        let error = decodingError { _ = try decode(Chain.self, deep) }
        guard case .dataCorrupted(let context)? = error else { Issue.record("expected dataCorrupted"); return }
        #expect(context.debugDescription.contains("deeper"))
        #expect(context.codingPath.count > 60)
        // Within the limit it decodes; a custom limit applies.
        _ = try decode(Chain.self, try encode(Chain.depth(60)))
        var strict = ProtobufDecoder()
        strict.maxDepth = 3
        #expect(throws: DecodingError.self) { try strict.decode(Chain.self, from: try encode(Chain.depth(5))) }
        // Hand-made deep nesting of a million levels of garbage is rejected quickly.
        var bomb: [UInt8] = []
        for _ in 0..<100 { bomb = [0x0a] + lengthVarint(bomb.count) + bomb }
        #expect(throws: DecodingError.self) { try decode(Chain.self, bomb) }
    }

    @Test func sizeLimit() throws {
        let big = try encode(Test2(b: String(repeating: "a", count: 2000)))
        let decoder = ProtobufDecoder(limits: .init(maxDepth: 64, maxMessageSize: 1000))
        let error = decodingError { _ = try decoder.decode(Test2.self, from: big) }
        guard case .dataCorrupted(let context)? = error else { Issue.record("expected dataCorrupted"); return }
        #expect(context.debugDescription.contains("exceeds"))
        #expect(try ProtobufDecoder().decode(Test2.self, from: big).b.count == 2000)
    }

    @Test func badUUIDAndTimestamp() {
        struct S: Codable { var id: UUID; var date: Date; enum CodingKeys: Int, CodingKey { case id = 1, date } }
        #expect(path(of: decodingError { _ = try decode(S.self, bytes("0a 02 01 02")) }) == ["id"])
        #expect(path(of: decodingError { _ = try decode(S.self, bytes("12 02 08 80")) }) == ["date"])
    }

    @Test func mapWithWrongEntry() {
        struct M: Codable { var m: [String: Int32]; enum CodingKeys: Int, CodingKey { case m = 1 } }
        #expect(path(of: decodingError { _ = try decode(M.self, bytes("08 01")) }) == ["m"])
        #expect(decodingError { _ = try decode(M.self, bytes("0a 02 0a 05")) } != nil)
    }

    @Test func randomBytesAndMutationsNeverTrap() throws {
        var generator = SplitMix64(seed: 0x5eed)
        var sample = Everything()
        sample.string = "hello"
        sample.ints = [1, -2, 300]
        sample.messages = [Nested(name: "a", value: 1), Nested()]
        sample.map = ["a": "b", "c": "d"]
        sample.intMap = [5: Nested(name: "x", value: 2)]
        sample.optionalNested = Nested(name: "o", value: 3)
        sample.dates = [Date(timeIntervalSince1970: 12)]
        sample.byteArray = [1, 2, 3]
        let valid = try encode(sample)
        var decoded = 0
        var failed = 0
        func attempt(_ input: [UInt8]) {
            do {
                _ = try decode(Everything.self, input)
                _ = try decode(Outer.self, input)
                decoded += 1
            } catch is DecodingError {
                failed += 1
            } catch {
                Issue.record("unexpected error type \(error)")
            }
        }
        for _ in 0..<2000 {
            let length = Int(generator.next() % 64)
            attempt((0..<length).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
        }
        for _ in 0..<3000 {
            var input = valid
            for _ in 0..<(1 + Int(generator.next() % 4)) {
                let position = Int(generator.next() % UInt64(input.count))
                switch generator.next() % 4 {
                case 0: input[position] = UInt8(truncatingIfNeeded: generator.next())
                case 1: input.remove(at: position)
                case 2: input.insert(UInt8(truncatingIfNeeded: generator.next()), at: position)
                default: input = Array(input.prefix(position))
                }
                if input.isEmpty { break }
            }
            attempt(input)
        }
        #expect(decoded + failed == 5000)
        #expect(failed > 0)
    }
}

func lengthVarint(_ n: Int) -> [UInt8] {
    var out: [UInt8] = []
    out.appendVarint(UInt64(n))
    return out
}

struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
