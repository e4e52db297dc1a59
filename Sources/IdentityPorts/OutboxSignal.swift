import Foundation
import Synchronization

/// Wakes the outbox workers of this process when a transaction that enqueued a mail commits
/// (`SQLiteUserStore.enqueue` registers the call). A worker listens while it runs; an extra
/// wake-up costs one look for due rows.
public final class OutboxSignal: Sendable {
    /// The process's signal.
    public static let shared = OutboxSignal()
    private let listeners = Mutex<[UInt64: @Sendable () -> Void]>([:])
    private let nextKey = Mutex<UInt64>(0)

    /// Calls `listener` at every `fire()` until `remove(_:)` with the key returned.
    public func add(_ listener: @escaping @Sendable () -> Void) -> UInt64 {
        let key = nextKey.withLock { $0 += 1; return $0 }
        listeners.withLock { $0[key] = listener }
        return key
    }

    /// Stops calling the listener of `key`.
    public func remove(_ key: UInt64) {
        listeners.withLock { _ = $0.removeValue(forKey: key) }
    }

    /// Calls every listener.
    public func fire() {
        for listener in listeners.withLock({ Array($0.values) }) { listener() }
    }
}
