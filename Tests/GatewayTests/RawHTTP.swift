import GatehouseTestSupport
import Prometheus
import Testing

@testable import Gateway

extension RawResponse {
    /// Checks an RFC 9457 problem with `status` and `code`.
    func expectProblem(_ status: Int, _ code: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let wrong = problemMismatches(status, code)
        #expect(wrong.isEmpty, "\(wrong)", sourceLocation: sourceLocation)
    }
}

extension Harness {
    /// The value of one series in the metrics registry (`name{labels}` exactly as exposed), or nil.
    func metric(_ series: String) -> Double? {
        for line in metrics.registry.emitToString().split(separator: "\n") where line.hasPrefix(series + " ") {
            return Double(line.dropFirst(series.count + 1))
        }
        return nil
    }
}
