import Foundation

/// The `stream` scenario (issue 21): N anonymous users each hold one `GET /v1/me/events` stream
/// open while `PATCH /v1/me` changes their settings at a fixed rate; every `change` event is
/// checked against the changes made (none lost, none twice) and its delivery latency measured.
public struct StreamLoadConfiguration: Sendable {
    /// The most streams accepted.
    public static let maxStreams = 20_000
    /// The highest change rate accepted (per second).
    public static let maxRate: Double = 20_000
    /// The longest change phase accepted, in seconds: with setup and the drain it stays well
    /// inside the access tokens' default lifetime (900 s), so no stream meets `token_expiring`.
    public static let maxDuration: Double = 600
    /// The longest drain accepted, in seconds.
    public static let maxDrain: Double = 120

    /// Base URL of the gateway (plain http; the streams use the loop engine's sockets).
    public var url: String
    /// Users created (anonymously), each with one stream.
    public var streams: Int
    /// `PATCH /v1/me` per second, spread round-robin over the users.
    public var rate: Double
    /// Seconds of changes.
    public var duration: Double
    /// Seconds to wait after the last change for its events (the run ends sooner once every
    /// expected event arrived).
    public var drain: Double = 5
    /// Seconds allowed for opening all the streams (each must deliver its snapshot).
    public var openTimeout: Double = 120
    /// Per-request timeout (sign-ups and changes), in seconds.
    public var timeout: Double = 10
    /// Requests in flight at once during setup and for the changes (also how many changes can
    /// be late at once).
    public var concurrency: Int = 64
    /// Streams connecting at once per loop thread (a bound on the server's accept queue).
    public var openWindow: Int = 128
    /// Event-loop threads; the streams and the requests are spread over them.
    public var threads: Int = 2
    /// The gateway's process id: its RSS (VmRSS in /proc) is read before and after the streams open.
    public var gatewayPID: Int32?
    /// Without it, only loopback targets are accepted.
    public var allowRemote = false

    /// A configuration with these bounds and the defaults above.
    public init(url: String = "http://127.0.0.1:8080", streams: Int = 100, rate: Double = 100, duration: Double = 10) {
        self.url = url
        self.streams = streams
        self.rate = rate
        self.duration = duration
    }

    /// Changes the run makes: `rate × duration`, rounded down (at least 1).
    public var changeCount: Int { max(Int(rate * duration), 1) }

    /// Throws a clear message for any value out of range.
    public func validate() throws {
        guard (1...Self.maxStreams).contains(streams) else {
            throw LoadError.invalidConfiguration("--streams must be in 1...\(Self.maxStreams)")
        }
        guard rate > 0, rate <= Self.maxRate else { throw LoadError.invalidConfiguration("--rate must be > 0 and <= \(Int(Self.maxRate)) per second") }
        guard duration > 0, duration <= Self.maxDuration else {
            throw LoadError.invalidConfiguration("--duration must be > 0 and <= \(Int(Self.maxDuration)) seconds for the stream scenario")
        }
        guard drain >= 0, drain <= Self.maxDrain else { throw LoadError.invalidConfiguration("--drain must be in 0...\(Int(Self.maxDrain)) seconds") }
        guard openTimeout > 0, openTimeout <= 600 else { throw LoadError.invalidConfiguration("--open-timeout must be > 0 and <= 600 seconds") }
        guard timeout > 0, timeout <= LoadConfiguration.maxTimeout else {
            throw LoadError.invalidConfiguration("--timeout must be > 0 and <= \(Int(LoadConfiguration.maxTimeout)) seconds")
        }
        guard (1...LoadConfiguration.maxConcurrency).contains(concurrency) else {
            throw LoadError.invalidConfiguration("--concurrency must be in 1...\(LoadConfiguration.maxConcurrency)")
        }
        guard (1...4096).contains(openWindow) else { throw LoadError.invalidConfiguration("--open-window must be in 1...4096") }
        guard (1...LoadConfiguration.maxThreads).contains(threads) else {
            throw LoadError.invalidConfiguration("--threads must be in 1...\(LoadConfiguration.maxThreads)")
        }
        if let gatewayPID, gatewayPID <= 0 { throw LoadError.invalidConfiguration("--gateway-pid must be a process id") }
    }
}

/// Reads a process's resident set size (`VmRSS` of `/proc/PID/status`) in KiB; nil when it
/// cannot be read (no such process, not Linux).
public func residentKiB(pid: Int32) -> Int? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    return residentKiB(status: text)
}

/// `VmRSS` of a `/proc/PID/status` text, in KiB.
func residentKiB(status text: String) -> Int? {
    for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        let fields = line.dropFirst(6).split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard let value = fields.first.flatMap({ Int($0) }) else { return nil }
        return fields.dropFirst().first?.lowercased() == "mb" ? value * 1024 : value
    }
    return nil
}

/// Milliseconds since 1970 of an RFC 3339 UTC-or-offset timestamp such as
/// `2026-11-25T12:00:00.123Z` (the `occurredAt` of a change); nil when malformed.
func epochMilliseconds(rfc3339 text: String) -> Int64? {
    let bytes = Array(text.utf8)
    guard bytes.count >= 20 else { return nil }
    func number(_ from: Int, _ count: Int) -> Int? {
        guard from + count <= bytes.count else { return nil }
        var value = 0
        for byte in bytes[from..<(from + count)] {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            value = value * 10 + Int(byte - 0x30)
        }
        return value
    }
    guard let year = number(0, 4), bytes[4] == 0x2D, let month = number(5, 2), bytes[7] == 0x2D, let day = number(8, 2),
        bytes[10] == 0x54 || bytes[10] == 0x74, let hour = number(11, 2), bytes[13] == 0x3A, let minute = number(14, 2),
        bytes[16] == 0x3A, let second = number(17, 2), (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
    else { return nil }
    var index = 19
    var millis = 0
    if index < bytes.count, bytes[index] == 0x2E {
        index += 1
        var digits = 0
        while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 {
            if digits < 3 { millis = millis * 10 + Int(bytes[index] - 0x30) }
            digits += 1
            index += 1
        }
        guard digits > 0 else { return nil }
        for _ in min(digits, 3)..<3 { millis *= 10 }
    }
    var offsetMinutes = 0
    guard index < bytes.count else { return nil }
    switch bytes[index] {
    case 0x5A, 0x7A:  // Z
        guard index + 1 == bytes.count else { return nil }
    case 0x2B, 0x2D:  // + or -
        guard index + 6 == bytes.count, let h = number(index + 1, 2), bytes[index + 3] == 0x3A, let m = number(index + 4, 2) else { return nil }
        offsetMinutes = (h * 60 + m) * (bytes[index] == 0x2D ? -1 : 1)
    default:
        return nil
    }
    // Days from the civil date (Howard Hinnant's algorithm), no time zone database involved.
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yoe = y - era * 400
    let mp = (month + 9) % 12
    let doy = (153 * mp + 2) / 5 + day - 1
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
    let days = Int64(era * 146_097 + doe - 719_468)
    let seconds = days * 86_400 + Int64(hour * 3600 + minute * 60 + second) - Int64(offsetMinutes * 60)
    return seconds * 1000 + Int64(millis)
}
