import Foundation
import GRDB
import Synchronization

/// Group commit: concurrent writes share one SQLite transaction.
///
/// Each write waits in a queue; whoever finds the writer idle starts a drain on GRDB's writer
/// queue, which takes every queued write, runs each inside its own savepoint of one
/// transaction, commits once and only then answers every caller. A write is acknowledged
/// only after the commit that holds it, so the durability of one write is the durability of
/// the commit (`synchronous=NORMAL`: survives a process crash; `FULL`: survives power loss).
///
/// Under load this turns N commits (N WAL appends of the same hot pages, N fsyncs with `FULL`)
/// into one, while a lone write still commits at once: there is no timer, a batch is simply
/// whatever arrived while the previous one was being written.
final class GroupCommit: Sendable {
    /// A queued write: `run` executes inside the transaction, `finish` answers the caller
    /// (with nil on success) after the commit or the failure.
    struct Pending: Sendable {
        let run: @Sendable (Database) throws -> Void
        let finish: @Sendable ((any Error)?) -> Void
    }

    private struct State {
        var queue: [Pending] = []
        var draining = false
    }

    private let state = Mutex(State())
    private let writer: DatabasePool
    /// Largest number of writes in one transaction (bounds a transaction's size and latency).
    let maxBatch: Int

    init(writer: DatabasePool, maxBatch: Int = 256) {
        self.writer = writer
        self.maxBatch = maxBatch
    }

    /// Runs `body` in the next group transaction and returns its result once committed.
    func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let box = ResultBox<T>()
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let pending = Pending(
                run: { db in box.set(try body(db)) },
                finish: { error in
                    if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: box.take()) }
                })
            let startDrain = state.withLock { state -> Bool in
                state.queue.append(pending)
                if state.draining { return false }
                state.draining = true
                return true
            }
            if startDrain { writer.asyncWriteWithoutTransaction { db in self.drain(db) } }
        }
    }

    /// Runs batches until the queue is empty, on GRDB's writer queue.
    private func drain(_ db: Database) {
        while true {
            let batch: [Pending] = state.withLock { state in
                if state.queue.isEmpty {
                    state.draining = false
                    return []
                }
                let count = min(state.queue.count, maxBatch)
                let batch = Array(state.queue.prefix(count))
                state.queue.removeFirst(count)
                return batch
            }
            if batch.isEmpty { return }
            run(batch, db)
        }
    }

    private func run(_ batch: [Pending], _ db: Database) {
        var outcomes = [(any Error)?](repeating: nil, count: batch.count)
        do {
            try db.inTransaction(.immediate) {
                // Each write in a savepoint of its own, so a failing write rolls back alone and
                // the others still commit. The savepoint statements are prepared once per
                // connection (GRDB's `inSavepoint` parses its SQL on every call).
                let begin = try db.cachedStatement(sql: "SAVEPOINT gatehouse_write")
                let release = try db.cachedStatement(sql: "RELEASE SAVEPOINT gatehouse_write")
                let rollback = try db.cachedStatement(sql: "ROLLBACK TO SAVEPOINT gatehouse_write")
                for (index, pending) in batch.enumerated() {
                    try begin.execute()
                    do {
                        try pending.run(db)
                    } catch {
                        outcomes[index] = error
                        // If SQLite already rolled the whole transaction back (I/O error, disk
                        // full), these throw and the batch fails as a whole, as it must.
                        try rollback.execute()
                    }
                    try release.execute()
                }
                return .commit
            }
        } catch {
            // The transaction itself failed (BEGIN or COMMIT): nothing of this batch is durable.
            for pending in batch { pending.finish(error) }
            return
        }
        for (pending, outcome) in zip(batch, outcomes) { pending.finish(outcome) }
    }
}

/// Carries a write's result from the writer queue to its caller.
final class ResultBox<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: T?

    func set(_ newValue: T) { lock.withLock { value = newValue } }

    func take() -> T { lock.withLock { value! } }
}
