import Logging
import Synchronization

/// A log handler keeping every line, so a test can check what was (not) logged.
final class LogRecorder: LogHandler, Sendable {
    struct Line: Sendable {
        var level: Logger.Level
        var message: String
    }
    private let store = Mutex<[Line]>([])

    var lines: [Line] { store.withLock { $0 } }

    /// Lines at `error` or above.
    var errors: [Line] { lines.filter { $0.level >= .error } }

    var logLevel: Logger.Level {
        get { .trace }
        set {}
    }
    var metadata: Logger.Metadata {
        get { [:] }
        set {}
    }
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { nil }
        set {}
    }

    func log(event: LogEvent) {
        let line = Line(level: event.level, message: "\(event.message) \(event.metadata ?? [:])")
        store.withLock { $0.append(line) }
    }
}
