import Foundation
import GatehouseSupport
import Synchronization

/// A wall clock that stands still until a test moves it: pass `wallClock` to the code under
/// test, then `advance(by:)` to make tokens expire, sessions go idle or sweeps come due at once.
public final class ManualClock: Sendable {
    private let current: Mutex<Date>

    /// A clock reading `start` (by default 2027-01-15T08:00:00Z, a round, fixed instant).
    public init(start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        current = Mutex(start)
    }

    /// The time the clock reads.
    public var now: Date { current.withLock { $0 } }

    /// Moves the clock `seconds` forward (or back, if negative).
    public func advance(by seconds: TimeInterval) {
        current.withLock { $0 = $0.addingTimeInterval(seconds) }
    }

    /// Sets the clock to `date`.
    public func set(_ date: Date) {
        current.withLock { $0 = date }
    }

    /// This clock as the `WallClock` the services take.
    public var wallClock: WallClock { WallClock { self.now } }
}
