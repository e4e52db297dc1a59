import Foundation

/// Dates as the stores keep them: whole milliseconds since 1970 in an INTEGER column.
extension Date {
    /// Milliseconds since 1970, the precision the stores keep.
    public var millisecondsSince1970: Int64 { Int64((timeIntervalSince1970 * 1000).rounded()) }
    /// This date rounded to whole milliseconds.
    public var roundedToMilliseconds: Date { Date(millisecondsSince1970: millisecondsSince1970) }
    /// The date `ms` milliseconds after 1970.
    public init(millisecondsSince1970 ms: Int64) { self.init(timeIntervalSince1970: Double(ms) / 1000) }
}
