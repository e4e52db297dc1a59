import Foundation

/// What a run reports: a table for people, one JSON object for machines, and whether it found
/// a problem (`--fail-on-error` then exits 1).
public protocol LoadReport: Encodable, Sendable {
    /// The human-readable table.
    func textReport() -> String
    /// Whether the run found a problem.
    var hadErrors: Bool { get }
}

extension LoadReport {
    /// One JSON object (sorted keys, one line).
    public func json() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(self) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }
}

extension LoadResult: LoadReport {
    /// The human-readable table.
    public func textReport() -> String {
        var lines: [String] = []
        func fmt(_ value: Double, _ digits: Int = 2) -> String { String(format: "%.\(digits)f", value) }
        lines.append("scenario      \(scenario)\(mix.map { "  (mix \($0))" } ?? "")")
        lines.append("target        \(url)")
        lines.append("concurrency   \(concurrency)")
        var bounds = "duration \(fmt(durationSeconds, 0)) s"
        if let requestLimit { bounds += ", requests \(requestLimit)" }
        lines.append("bounds        \(bounds); stopped by \(stoppedBy)")
        if setupUsers > 0 { lines.append("setup         \(setupUsers) users in \(fmt(setupSeconds)) s (not recorded)") }
        if warmupSeconds > 0 { lines.append("warmup        \(fmt(warmupSeconds, 1)) s (not recorded)") }
        lines.append("measured      \(fmt(elapsedSeconds, 3)) s")
        lines.append("requests      \(totalRequests) total, \(successfulRequests) successful, \(failedRequests) failed")
        lines.append("throughput    \(fmt(throughput, 1)) successful req/s")
        if sessionRenewals > 0 { lines.append("renewals      \(sessionRenewals) sessions refreshed (not recorded) before their access token expired") }
        if sessionRecoveries > 0 { lines.append("recoveries    \(sessionRecoveries) sessions re-established by sign-in after a failed refresh") }
        lines.append("")
        lines.append(Self.latencyHeader)
        lines.append(Self.latencyRow("successful", latencyMs))
        if errorLatencyMs.count > 0 { lines.append(Self.latencyRow("failed", errorLatencyMs)) }
        if operations.count > 1 {
            for (name, operation) in operations.sorted(by: { $0.key < $1.key }) {
                lines.append(Self.latencyRow("  \(name)", operation.latencyMs))
            }
        }
        if failedRequests > 0 {
            lines.append("")
            lines.append("errors")
            for (status, count) in errorsByStatus.sorted(by: { $0.key < $1.key }) {
                lines.append("  status \(status)".padding(to: 24) + "\(count)" + (errorSamples[status].map { "   e.g. \(Self.oneLine($0))" } ?? ""))
            }
            for (kind, count) in errorsByKind.sorted(by: { $0.key < $1.key }) {
                lines.append("  \(kind)".padding(to: 24) + "\(count)" + (errorSamples[kind].map { "   e.g. \(Self.oneLine($0))" } ?? ""))
            }
        }
        if operations.count > 1 {
            lines.append("")
            lines.append("per operation".padding(to: 16) + "total".leftPadding(to: 10) + "ok".leftPadding(to: 10) + "failed".leftPadding(to: 10) + "req/s".leftPadding(to: 12))
            for (name, operation) in operations.sorted(by: { $0.key < $1.key }) {
                lines.append("  \(name)".padding(to: 16) + "\(operation.totalRequests)".leftPadding(to: 10)
                    + "\(operation.successfulRequests)".leftPadding(to: 10) + "\(operation.failedRequests)".leftPadding(to: 10)
                    + fmt(operation.throughput, 1).leftPadding(to: 12))
            }
        }
        return lines.joined(separator: "\n")
    }

    static let latencyHeader = "latency (ms)".padding(to: 16)
        + ["count", "p50", "p90", "p99", "p99.9", "max"].map { $0.leftPadding(to: 10) }.joined()

    static func latencyRow(_ label: String, _ summary: LatencySummary) -> String {
        label.padding(to: 16) + "\(summary.count)".leftPadding(to: 10)
            + [summary.p50, summary.p90, summary.p99, summary.p999, summary.max]
            .map { String(format: "%.3f", $0).leftPadding(to: 10) }.joined()
    }

    static func oneLine(_ text: String) -> String {
        let flat = text.replacingOccurrences(of: "\n", with: " ")
        return flat.count > 120 ? String(flat.prefix(117)) + "..." : flat
    }
}

extension String {
    func padding(to width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }

    func leftPadding(to width: Int) -> String {
        count >= width ? " " + self : String(repeating: " ", count: width - count) + self
    }
}
