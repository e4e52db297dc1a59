import Testing
import GatehouseSupport

@Suite("W3C traceparent")
struct TraceParentTests {
    static let sample = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    @Test("a valid value parses into its parts and prints back the same")
    func valid() throws {
        let trace = try #require(TraceParent(Self.sample))
        #expect(trace.traceIDHigh == 0x4bf9_2f35_77b3_4da6)
        #expect(trace.traceIDLow == 0xa3ce_929d_0e0e_4736)
        #expect(trace.parentID == 0x00f0_67aa_0ba9_02b7)
        #expect(trace.flags == 0x01)
        #expect(trace.traceID == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(trace.description == Self.sample)
        #expect(TraceParent("00-00000000000000000000000000000001-0000000000000001-00") != nil)
        #expect(TraceParent("00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-ff")?.flags == 0xff)
    }

    /// The sample value with `replacement` written over it at `offset`.
    static func mutated(_ offset: Int, _ replacement: String) -> String {
        var chars = Array(sample)
        for (i, c) in replacement.enumerated() { chars[offset + i] = c }
        return String(chars)
    }

    @Test(
        "every malformed form is refused",
        arguments: [
            // Versions other than 00 (ff is forbidden, others unknown to this parser).
            mutated(0, "01"), mutated(0, "ff"), mutated(0, "0x"),
            // Upper case or non-hex digits in each field.
            mutated(3, "4B"), mutated(34, "G"), mutated(36, "00F0"), mutated(51, "Z"), mutated(53, "0A"), mutated(53, "g1"),
            // Dashes missing or moved.
            mutated(2, "_"), mutated(35, "."), mutated(52, " "), mutated(34, "-"),
            // All-zero trace id or parent id.
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            // Wrong length, extra data, whitespace, empty.
            String(sample.dropLast()), sample + "0", sample + "-00", " " + sample, sample + " ", "", "00",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e47366-0f067aa0ba902b7-01",
            // 55 characters, but not 55 ASCII bytes.
            mutated(3, "é"),
        ])
    func malformed(_ text: String) {
        #expect(TraceParent(text) == nil, "\(text)")
    }

    @Test("new traces are valid, distinct, and parse back")
    func random() throws {
        var seen = Set<TraceParent>()
        for _ in 0..<10_000 {
            let trace = TraceParent.random()
            #expect(trace.traceIDHigh | trace.traceIDLow != 0 && trace.parentID != 0)
            #expect(trace.flags == 0)
            #expect(TraceParent(trace.description) == trace)
            seen.insert(trace)
        }
        #expect(seen.count == 10_000)
        #expect(Set(seen.map(\.traceID)).count == 10_000)
    }

    @Test("the task-local trace is bound for a scope and inherited by child tasks")
    func taskLocal() async throws {
        let trace = try #require(TraceParent(Self.sample))
        #expect(TraceContext.current == nil)
        await TraceContext.$current.withValue(trace) {
            #expect(TraceContext.current == trace)
            await withTaskGroup(of: TraceParent?.self) { group in
                group.addTask { TraceContext.current }
                for await seen in group { #expect(seen == trace) }
            }
        }
        #expect(TraceContext.current == nil)
    }
}
