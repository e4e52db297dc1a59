import Foundation
import GatehouseSupport
import Logging
import Synchronization

extension Logger.MetadataProvider {
    /// `trace_id`: the trace of the request the current task serves (`TraceContext.current`),
    /// so a request can be followed across the gateway and both services with grep. Asked only
    /// when a line is written.
    static let traceID = Logger.MetadataProvider {
        guard let trace = TraceContext.current else { return [:] }
        return ["trace_id": .string(trace.traceID)]
    }
}

/// Writes log lines to standard error, in the same format as swift-log's `StreamLogHandler`:
/// `2026-01-31T12:00:00+0000 warning gatehouse.rpc: key=value [Module] message`.
///
/// The difference is when metadata is formatted. `StreamLogHandler` re-renders its metadata
/// text every time a key is set, and the gateway and Hummingbird set a request id on every
/// request's logger (about 10 µs each under load, for lines that at the default level are never
/// written). Here metadata is only stored when set and only formatted when a line is written.
struct StandardErrorLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?
    /// Stamps each line.
    let clock: WallClock

    init(label: String, level: Logger.Level, metadataProvider: Logger.MetadataProvider? = nil, clock: WallClock = .system) {
        self.label = label
        self.logLevel = level
        self.metadataProvider = metadataProvider
        self.clock = clock
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let line = Self.format(
            timestamp: Self.timestamp(clock.now), level: event.level, label: label,
            metadata: Self.merge(base: metadata, provided: metadataProvider?.get(), explicit: event.metadata, error: event.error),
            source: event.source, message: event.message.description)
        Self.write(line)
    }

    /// Base metadata, then the provider's, then the call's, then the error's (later keys win).
    static func merge(
        base: Logger.Metadata, provided: Logger.Metadata?, explicit: Logger.Metadata?, error: (any Error)?
    ) -> Logger.Metadata {
        var all = base
        if let provided, !provided.isEmpty { all.merge(provided) { _, new in new } }
        if let explicit, !explicit.isEmpty { all.merge(explicit) { _, new in new } }
        if let error {
            all["error.message"] = "\(error)"
            all["error.type"] = "\(String(reflecting: type(of: error)))"
        }
        return all
    }

    static func format(
        timestamp: String, level: Logger.Level, label: String, metadata: Logger.Metadata, source: String, message: String
    ) -> String {
        let pretty = metadata.isEmpty ? "" : " " + metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        return "\(timestamp) \(level)\(label.isEmpty ? "" : " ")\(label):\(pretty) [\(source)] \(message)\n"
    }

    /// `date` in local time, `%Y-%m-%dT%H:%M:%S%z`, as `StreamLogHandler` writes it.
    static func timestamp(_ date: Date) -> String {
        var now = time_t(date.timeIntervalSince1970.rounded(.down))
        var local = tm()
        guard localtime_r(&now, &local) != nil else { return "<unknown>" }
        var buffer = [CChar](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &local)
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// One `write(2)` per line, under a lock, so lines from different threads never interleave.
    private static let lock = Mutex(())

    static func write(_ line: String) {
        var line = line
        lock.withLock { _ in
            line.withUTF8 { bytes in
                var offset = 0
                while offset < bytes.count {
                    let written = Foundation.write(2, bytes.baseAddress! + offset, bytes.count - offset)
                    if written < 0 {
                        if errno == EINTR { continue }
                        return
                    }
                    offset += written
                }
            }
        }
    }
}
