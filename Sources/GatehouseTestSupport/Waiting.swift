/// Thrown by `waitUntil` when its condition did not hold before the deadline.
public struct WaitTimedOut: Error, CustomStringConvertible {
    /// What was waited for, and how long.
    public let description: String
    /// A time-out saying `description`.
    public init(description: String) { self.description = description }
}

/// Polls `condition` every `interval` until it holds, and throws `WaitTimedOut` (naming `what`)
/// if it still does not after `timeout`.
///
/// For correctness, not speed: the default deadline is generous because test runs share two
/// cores with parallel suites and other builds, and a condition that holds returns at the next
/// poll anyway. Use it in place of a fixed sleep that "should be long enough".
public func waitUntil(
    _ what: @autoclosure () -> String = "condition",
    timeout: Duration = .seconds(30), interval: Duration = .milliseconds(10),
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while try await !condition() {
        guard ContinuousClock.now < deadline else {
            throw WaitTimedOut(description: "timed out after \(timeout) waiting for \(what())")
        }
        try await Task.sleep(for: interval)
    }
}
