import Foundation
import Logging
import PostgresNIO
import PostgresSupport
import Synchronization

/// The token `PostgresUserStore.observeChangeCommits` returns: a task that LISTENs on the change
/// log's channel on a pool connection it holds, and calls `onCommit` for every notification (one
/// per committed transaction that added a change, whichever instance made it). When the
/// connection fails (or stops answering the check it gets every `checkInterval`), it connects
/// again after a backoff (0.1 s doubling to 5 s) and calls `onCommit` once the listening is back,
/// as it does the first time: a change may have committed while nobody listened. Its deinit
/// stops the task (UNLISTEN, the connection back to the pool).
final class ChangeCommitListener: Sendable {
    private let task: Task<Void, Never>

    /// How often the held connection is checked (`SELECT 1`), and how long the check may take.
    static let checkInterval: Duration = .seconds(15)
    static let checkTimeout: Duration = .seconds(10)

    init(client: PostgresClient, channel: String, logger: Logger, onCommit: @escaping @Sendable () -> Void) {
        task = Task { await Self.listen(client: client, channel: channel, logger: logger, onCommit: onCommit) }
    }

    deinit { task.cancel() }

    /// The listening loop, until cancelled or the client is closed.
    private static func listen(client: PostgresClient, channel: String, logger: Logger, onCommit: @escaping @Sendable () -> Void) async {
        let queryLogger = Logger(label: "gatehouse.identity.postgres.listen", factory: { _ in SwiftLogNoOpLogHandler() })
        let backoff = Mutex<Duration>(.milliseconds(100))
        while !Task.isCancelled {
            do {
                // `failingOnClose`: LISTEN written to a connection a crash closed would never answer.
                try await client.withConnection { connection in try await connection.failingOnClose {
                    try await connection.listen(on: channel) { notifications in
                        // LISTEN is active from here: what commits now is notified.
                        backoff.withLock { $0 = .milliseconds(100) }
                        onCommit()
                        try await withThrowingTaskGroup(of: Void.self) { group in
                            group.addTask {
                                for try await _ in notifications { onCommit() }
                                throw ListenEnded()
                            }
                            group.addTask {
                                while true {
                                    try await Task.sleep(for: checkInterval)
                                    // A check that hangs (a peer gone without a word) closes the
                                    // connection, which ends the listening with an error.
                                    let watchdog = Task {
                                        try await Task.sleep(for: checkTimeout)
                                        try? await connection.close()
                                    }
                                    defer { watchdog.cancel() }
                                    try await connection.query("SELECT 1", logger: queryLogger)
                                }
                            }
                            try await group.next()
                            group.cancelAll()
                        }
                    }
                } }
            } catch {
                if Task.isCancelled { return }
                if let error = error as? PSQLError, error.code == .poolClosed { return }
                logger.warning("change log: listening for commits failed; connecting again: \(String(describing: type(of: error)))")
            }
            if Task.isCancelled { return }
            let delay = backoff.withLock { delay in
                defer { delay = min(delay * 2, .seconds(5)) }
                return delay
            }
            try? await Task.sleep(for: delay)
        }
    }

    private struct ListenEnded: Error {}
}
