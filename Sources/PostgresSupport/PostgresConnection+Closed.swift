import NIOCore
import PostgresNIO
import Synchronization

/// A statement written to a connection that is already closed is never answered: postgres-nio
/// writes it to the channel without a promise, the closed channel drops it, and its caller waits
/// forever. The pool can lease such a connection (a crash closed it before the pool learned of
/// it), and a connection held for long (a job's lead, a LISTEN) can close under its holder.
extension PostgresConnection {
    /// The connection closed under a call that had not ended `grace` later (`failingOnClose`).
    public struct ClosedUnderCall: Error, CustomStringConvertible {
        /// What a log line says.
        public var description: String { "the database connection closed under the call" }
    }

    /// Runs `body` in a task of its own and returns what it returns, unless this connection
    /// closes and `body` has not ended about `grace` to `2 × grace` later: then `body`'s task is
    /// cancelled and left behind, and this throws `ClosedUnderCall`. For the few calls that hold
    /// a connection outside `DatabaseHealth` (a job's lead, a LISTEN, migrations): it costs a
    /// task that looks every `grace`.
    public func failingOnClose<T: Sendable>(
        grace: Duration = .milliseconds(250), _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let outcome = FirstOutcome<T>()
        let task = Task {
            do { outcome.finish(.success(try await body())) } catch { outcome.finish(.failure(error)) }
        }
        // Looks every `grace` (a callback on `closeFuture` per call would pile up on a connection
        // that serves many): once closed, `body` has `grace` more to end.
        let watch = Task { [self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: grace)
                guard isClosed, !Task.isCancelled else { continue }
                try? await Task.sleep(for: grace)
                if outcome.finish(.failure(ClosedUnderCall())) { task.cancel() }
                return
            }
        }
        defer { watch.cancel() }
        let result = await withTaskCancellationHandler {
            await outcome.value()
        } onCancel: {
            task.cancel()
        }
        return try result.get()
    }
}

/// The first result a call gets (from its own task, or from a watch that gives it up), handed to
/// the one waiter.
final class FirstOutcome<T: Sendable>: Sendable {
    private let state = Mutex<(result: Result<T, any Error>?, waiter: CheckedContinuation<Result<T, any Error>, Never>?)>((nil, nil))

    /// Records `result` if none was; whether it was the first.
    @discardableResult
    func finish(_ result: Result<T, any Error>) -> Bool {
        let (first, waiter) = state.withLock { state -> (Bool, CheckedContinuation<Result<T, any Error>, Never>?) in
            guard state.result == nil else { return (false, nil) }
            state.result = result
            defer { state.waiter = nil }
            return (true, state.waiter)
        }
        waiter?.resume(returning: result)
        return first
    }

    /// The first result, once there is one.
    func value() async -> Result<T, any Error> {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Result<T, any Error>? in
                if let result = state.result { return result }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
