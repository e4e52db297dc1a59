import Foundation

/// Dates as the stores keep them: whole milliseconds since 1970 in an INTEGER column.
extension Date {
    /// Milliseconds since 1970, the precision the stores keep. A date beyond what an `Int64`
    /// holds (a far-off time from the wire) is clamped instead of trapping.
    public var millisecondsSince1970: Int64 {
        let ms = (timeIntervalSince1970 * 1000).rounded()
        guard ms.isFinite else { return 0 }
        return ms >= 9.2e18 ? Int64.max : ms <= -9.2e18 ? Int64.min : Int64(ms)
    }
    /// This date rounded to whole milliseconds.
    public var roundedToMilliseconds: Date { Date(millisecondsSince1970: millisecondsSince1970) }
    /// The date `ms` milliseconds after 1970.
    public init(millisecondsSince1970 ms: Int64) { self.init(timeIntervalSince1970: Double(ms) / 1000) }
}
