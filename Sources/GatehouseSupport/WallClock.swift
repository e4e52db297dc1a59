import Foundation

/// Where code reads the wall-clock time (token expiry, session lifetimes, sweeps, record
/// timestamps, backup names, log lines). Production passes `.system`; tests pass a clock they
/// move by hand (`ManualClock` in GatehouseTestSupport), so expiry is observed without waiting.
///
/// A struct holding one closure: reading it costs what the `() -> Date` closures it replaced
/// cost (one indirect call), which matters on the refresh and `GET /v1/me` hot paths.
/// Elapsed time (RPC deadlines, timeouts, hash-pool estimates) stays on `ContinuousClock`.
public struct WallClock: Sendable {
    /// Reads the time (inlinable, so `now` is one indirect call at the caller).
    @usableFromInline let read: @Sendable () -> Date

    /// A clock that answers `now` with `read()`.
    public init(_ read: @escaping @Sendable () -> Date) {
        self.read = read
    }

    /// The current time.
    @inlinable public var now: Date { read() }

    /// The machine's clock (`Date()`).
    public static let system = WallClock { Date() }

    /// A clock that always answers `date`.
    public static func fixed(_ date: Date) -> WallClock { WallClock { date } }
}
