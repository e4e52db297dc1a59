#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import GatehouseSupport
import Histogram
import Synchronization

/// The shared state of a `stream` run: the books, the streams' news from the loop threads, and
/// the change counters. Loop threads report here (`StreamSink`); everything sits behind one lock
/// (a few hundred nanoseconds per event at the rates this runs).
final class StreamRun: StreamSink, Sendable {
    struct State {
        var accounting = StreamAccounting()
        var opened = Set<Int>()
        var openFailures: [String: Int] = [:]
        var failureSamples: [String: String] = [:]
        var settled = 0
        var heartbeats = 0
        var closedByServer: [String: Int] = [:]
        var dropped = 0
        var closing = false
        var changesSent = 0
        var changesOK = 0
        var changeFailures: [String: Int] = [:]
        var changeLatency = Histogram<UInt64>(highestTrackableValue: 600_000_000, numberOfSignificantValueDigits: .three)
    }

    let state = Mutex(State())

    // MARK: StreamSink (loop threads)

    func streamFailed(_ index: Int, status: Int?, reason: String) {
        state.withLock { state in
            let key = status.map(String.init) ?? String(reason.prefix(while: { $0 != ":" }))
            state.openFailures[key, default: 0] += 1
            if state.failureSamples[key] == nil { state.failureSamples[key] = reason }
            state.settled += 1
        }
    }

    func streamDelivered(_ index: Int, _ items: [SSEReceivedItem]) {
        let nowMicros = Self.wallMicros()
        // Parse outside the lock.
        var changes: [(id: String?, value: Int?, latency: Int64?)] = []
        var snapshot = false
        var closed: [String] = []
        var comments = 0
        for item in items {
            switch item {
            case .event(let event):
                switch event.type {
                case "snapshot": snapshot = true
                case "change":
                    let parsed = Self.readChange(event.data)
                    changes.append((event.id, parsed.value, parsed.occurredAtMillis.map { nowMicros - $0 * 1000 }))
                case "closed":
                    let reason = (try? JSONValue.parse(Array(event.data.utf8)))?["reason"]?.string ?? "unknown"
                    closed.append(reason)
                default: break
                }
            case .comment: comments += 1
            case .retry: break
            }
        }
        state.withLock { state in
            if snapshot, state.opened.insert(index).inserted { state.settled += 1 }
            for change in changes {
                state.accounting.received(user: index, id: change.id, value: change.value, latencyMicros: change.latency)
            }
            for reason in closed { state.closedByServer[reason, default: 0] += 1 }
            state.heartbeats += comments
        }
    }

    func streamEnded(_ index: Int, reason: String) {
        state.withLock { state in
            if !state.closing { state.dropped += 1 }
        }
    }

    // MARK: Helpers

    /// `settings.n` and `occurredAt` (ms since 1970) of a `change` event's data.
    static func readChange(_ data: String) -> (value: Int?, occurredAtMillis: Int64?) {
        guard let json = try? JSONValue.parse(Array(data.utf8)) else { return (nil, nil) }
        let value = json["user"]?["settings"]?["n"]?.number.flatMap { $0 == $0.rounded() && abs($0) < 1e15 ? Int($0) : nil }
        let occurredAt = json["occurredAt"]?.string.flatMap { epochMilliseconds(rfc3339: $0) }
        return (value, occurredAt)
    }

    /// The wall clock in microseconds since 1970 (what `occurredAt` is compared with).
    static func wallMicros() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1_000_000 + Int64(spec.tv_nsec) / 1000
    }

    /// The request that opens user `index`'s stream.
    static func streamRequest(host: String, pathPrefix: String, token: String) -> [UInt8] {
        Array("GET \(pathPrefix)/v1/me/events HTTP/1.1\r\nHost: \(host)\r\nAccept: text/event-stream\r\nAuthorization: Bearer \(token)\r\n\r\n".utf8)
    }

    /// The body of the change that sets `settings.n` to `value`.
    static func changeBody(_ value: Int) -> [UInt8] { Array(#"{"settings":{"n":\#(value)}}"#.utf8) }
}
