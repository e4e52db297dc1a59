import Foundation
import GatehouseContracts
import GatehouseSupport
import NIOCore

/// The wire format of `GET /v1/me/events` (Server-Sent Events).
extension EventStream {
    static func event(id: UInt64?, event: String, data: [UInt8]) -> ByteBuffer {
        var buffer = ByteBuffer()
        append(&buffer, id: id, event: event, data: data)
        return buffer
    }

    /// `id: N\nevent: NAME\ndata: JSON\n\n`. The JSON must be on one line: a raw CR or LF in
    /// valid JSON can only be whitespace between tokens (inside strings they are escaped), such as
    /// in a settings document stored as written, so each becomes a space.
    static func append(_ buffer: inout ByteBuffer, id: UInt64?, event: String, data: [UInt8]) {
        if let id { buffer.writeString("id: \(id)\n") }
        buffer.writeString("event: \(event)\ndata: ")
        if data.contains(where: { $0 == 0x0A || $0 == 0x0D }) {
            buffer.writeBytes(data.map { $0 == 0x0A || $0 == 0x0D ? 0x20 : $0 })
        } else {
            buffer.writeBytes(data)
        }
        buffer.writeString("\n\n")
    }

    static func changeData(_ change: UserChange) -> [UInt8] {
        var w = JSONObjectWriter()
        w.strings("changes", change.kinds)
        if let user = change.user { w.raw("user", user.publicView) } else { w.raw("user", Array("null".utf8)) }
        w.string("occurredAt", formatMillis(change.occurredAt))
        return w.finish()
    }

    static func closedData(_ reason: StreamCloseReason) -> [UInt8] {
        var w = JSONObjectWriter()
        w.string("reason", reason.rawValue)
        w.bool("resumable", reason.resumable)
        w.string("message", reason.message)
        return w.finish()
    }

    /// `2026-11-25T12:00:00.123Z`.
    static func formatMillis(_ date: Date) -> String {
        let whole = ISO8601.format(date)
        guard whole.hasSuffix("Z") else { return whole }
        let t = date.timeIntervalSince1970
        let millis = Int(((t - t.rounded(.down)) * 1000).rounded(.down))
        let digits = String(millis)
        return whole.dropLast() + "." + String(repeating: "0", count: 3 - digits.count) + digits + "Z"
    }
}
