import Foundation
import Histogram
import Testing
@testable import LoadGenerator

@Suite("The stream scenario: parsing and accounting")
struct StreamScenarioTests {
    @Test("occurredAt: RFC 3339 timestamps to ms since 1970 (offsets, 1 to 6 fraction digits, before 1970); malformed ones refused")
    func timestamps() {
        // Expected values from Python's datetime.fromisoformat.
        let cases: [(String, Int64)] = [
            ("2026-11-25T12:00:00.123Z", 1_795_608_000_123), ("1970-01-01T00:00:00.000Z", 0), ("2000-02-29T23:59:59.999Z", 951_868_799_999),
            ("2038-01-19T03:14:08.001Z", 2_147_483_648_001), ("2026-03-01T00:00:00.5Z", 1_772_323_200_500),
            ("2026-11-25T12:00:00.123456Z", 1_795_608_000_123), ("2026-11-25T14:00:00.250+02:00", 1_795_608_000_250),
            ("2026-11-25T10:30:00.000-01:30", 1_795_608_000_000), ("1969-12-31T23:59:59.000Z", -1000),
        ]
        for (text, expected) in cases { #expect(epochMilliseconds(rfc3339: text) == expected, "\(text)") }
        #expect(epochMilliseconds(rfc3339: "2026-11-25T12:00:00Z") == 1_795_608_000_000)
        for bad in ["", "2026-11-25", "2026-11-25 12:00:00Z", "2026-13-25T12:00:00Z", "2026-11-25T12:00:00.Z", "2026-11-25T12:00:00.123",
                    "2026-11-25T12:00:00.123Zjunk", "2026-11-25T12:00:00+0200", "２026-11-25T12:00:00Z"] {
            #expect(epochMilliseconds(rfc3339: bad) == nil, "\(bad)")
        }
    }

    @Test("VmRSS from /proc/PID/status, in KiB; this process's own is readable")
    func residentSetSize() {
        #expect(residentKiB(status: "Name:\tgatehouse\nVmPeak:\t  900 kB\nVmRSS:\t   51234 kB\nThreads: 9\n") == 51234)
        #expect(residentKiB(status: "Name: x\n") == nil)
        #if os(Linux)
        #expect((residentKiB(pid: getpid()) ?? 0) > 0)
        #endif
        #expect(residentKiB(pid: Int32.max) == nil)
    }

    @Test("a change event's data: settings.n and occurredAt; anything else is unreadable")
    func changeData() {
        let data = #"{"changes":["settings"],"user":{"id":"u","settings":{"n":42,"theme":"x"}},"occurredAt":"2026-11-25T12:00:00.123Z"}"#
        let parsed = StreamRun.readChange(data)
        #expect(parsed.value == 42 && parsed.occurredAtMillis == 1_795_608_000_123)
        #expect(StreamRun.readChange(#"{"user":{"settings":{}}}"#).value == nil)
        #expect(StreamRun.readChange("not json").value == nil)
        #expect(String(decoding: StreamRun.changeBody(7), as: UTF8.self) == #"{"settings":{"n":7}}"#)
        let request = String(decoding: StreamRun.streamRequest(host: "127.0.0.1:8080", pathPrefix: "", token: "t"), as: UTF8.self)
        #expect(request == "GET /v1/me/events HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept: text/event-stream\r\nAuthorization: Bearer t\r\n\r\n")
    }

    @Test("accounting: events before their PATCH's answer count; lost, duplicated (by id or value), unexpected and unreadable are told apart")
    func accounting() {
        var books = StreamAccounting()
        // User 0: 1 and 2 made; 2 arrives before its PATCH answer is booked; 1 arrives twice.
        books.received(user: 0, id: "11", value: 2, latencyMicros: 1500)
        books.patched(user: 0, value: 1)
        books.patched(user: 0, value: 2)
        books.received(user: 0, id: "10", value: 1, latencyMicros: 2500)
        books.received(user: 0, id: "10", value: 1, latencyMicros: 2500)  // same id again
        books.received(user: 0, id: "12", value: 1, latencyMicros: 100)  // the same change under a new id
        // User 1: 3 made, never delivered; 99 delivered, never made; one unreadable.
        books.patched(user: 1, value: 3)
        books.received(user: 1, id: "13", value: 99, latencyMicros: nil)
        books.received(user: 1, id: "14", value: nil, latencyMicros: nil)
        // The same value for another user is not a duplicate.
        books.patched(user: 2, value: 1)
        #expect(!books.caughtUp)
        books.received(user: 2, id: "15", value: 1, latencyMicros: -5)

        let tally = books.tally()
        #expect(tally == StreamEventTally(expected: 4, received: 4, matched: 3, lost: 1, unexpected: 1, duplicates: 2, unreadable: 1))
        #expect(books.latency.totalCount == 3)
        #expect(books.latency.max >= 2500 && books.latency.min == 1)
    }

    @Test("the stream configuration refuses what is out of range; changes made are rate × duration")
    func configurationAndReport() throws {
        try StreamLoadConfiguration().validate()
        var bad = StreamLoadConfiguration(streams: 0)
        #expect(throws: LoadError.self) { try bad.validate() }
        bad = StreamLoadConfiguration(rate: 0)
        #expect(throws: LoadError.self) { try bad.validate() }
        bad = StreamLoadConfiguration(duration: 601)
        #expect(throws: LoadError.self) { try bad.validate() }
        bad = StreamLoadConfiguration()
        bad.gatewayPID = -1
        #expect(throws: LoadError.self) { try bad.validate() }
        #expect(StreamLoadConfiguration(rate: 0.5, duration: 1).changeCount == 1)
        #expect(StreamLoadConfiguration(rate: 1000, duration: 30).changeCount == 30_000)
    }
}
