import Foundation
import GatehouseSupport
import Hummingbird
import NIOCore

extension Request {
    /// The JSON body as `T`, read and checked as `decodeJSON` does, for a handler that needs only
    /// the value.
    func jsonBody<T: Decodable>(_ type: T.Type, limit: Int) async throws -> T {
        var request = self
        return try await request.decodeJSON(type, limit: limit).0
    }

    /// Reads and decodes a JSON body, turning every failure into a 4xx `GatewayError`:
    /// 415 for a non-JSON content type, 413 over `limit`, 400 `malformed_request` for bad JSON,
    /// a wrong type or a missing field.
    mutating func decodeJSON<T: Decodable>(_ type: T.Type, limit: Int) async throws -> (T, ByteBuffer) {
        guard let contentType = headers[.contentType], Self.isJSON(contentType) else {
            throw GatewayError.unsupportedMediaType
        }
        if let length = headers[.contentLength].flatMap(Int.init), length > limit {
            throw GatewayError.payloadTooLarge(limit)
        }
        let buffer: ByteBuffer
        do {
            buffer = try await collectBody(upTo: limit)
        } catch is NIOTooManyBytesError {
            throw GatewayError.payloadTooLarge(limit)
        }
        if let flatType = T.self as? any FlatJSONDecodable.Type, let members = JSONReader.flatStrings(buffer.readableBytesView),
            let value = flatType.init(flat: members) as? T
        {
            return (value, buffer)
        }
        do {
            return (try JSONDecoder().decode(T.self, from: Data(buffer.readableBytesView)), buffer)
        } catch let error as DecodingError {
            throw GatewayError.malformed(Self.describe(error))
        } catch let error as GatewayError {
            throw error
        } catch {
            throw GatewayError.malformed("The body is not valid JSON.")
        }
    }

    /// `application/json` or `application/*+json`, with any parameters.
    /// Compared byte by byte, case-insensitively (no lowercased copies: this runs on every body).
    static func isJSON(_ value: String) -> Bool {
        var value = value
        return value.withUTF8 { bytes in
            var end = bytes.firstIndex(of: UInt8(ascii: ";")) ?? bytes.count
            var start = 0
            while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start += 1 }
            while end > start, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
            let media = UnsafeBufferPointer(rebasing: bytes[start..<end])
            func matches(_ literal: StaticString, at offset: Int) -> Bool {
                let count = literal.utf8CodeUnitCount
                guard offset >= 0, offset + count <= media.count else { return false }
                for i in 0..<count {
                    var b = media[offset + i]
                    if b >= 0x41 && b <= 0x5A { b |= 0x20 }
                    if b != literal.utf8Start[i] { return false }
                }
                return true
            }
            if media.count == 16 && matches("application/json", at: 0) { return true }
            return media.count > 17 && matches("application/", at: 0) && matches("+json", at: media.count - 5)
        }
    }

    static func describe(_ error: DecodingError) -> String {
        func path(_ keys: [any CodingKey]) -> String {
            keys.isEmpty ? "the body" : "`" + keys.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".") + "`"
        }
        switch error {
        case .keyNotFound(let key, let ctx):
            return "Missing required field `\((ctx.codingPath + [key]).map(\.stringValue).joined(separator: "."))`."
        case .typeMismatch(let type, let ctx):
            return "Wrong type for \(path(ctx.codingPath)): expected \(Self.jsonTypeName(type))."
        case .valueNotFound(let type, let ctx):
            return "Wrong type for \(path(ctx.codingPath)): expected \(Self.jsonTypeName(type)), got null."
        case .dataCorrupted(let ctx):
            return ctx.codingPath.isEmpty ? "The body is not valid JSON." : "Invalid value for \(path(ctx.codingPath))."
        @unknown default:
            return "The body does not match the expected shape."
        }
    }

    static func jsonTypeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: return "a string"
        case is Bool.Type: return "a boolean"
        case is Int.Type, is Double.Type, is Int64.Type: return "a number"
        case is [Any].Type: return "an array"
        default: return "an object"
        }
    }
}

/// A JSON value that must be an object; used to type-check `settings`.
struct JSONObjectShape: Decodable {
    init(from decoder: any Decoder) throws {
        _ = try decoder.container(keyedBy: AnyKey.self)
    }
    struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}

/// A request body that can be built from a flat object of strings, the shape most request bodies
/// have (`{"refreshToken":"…"}`), read by `JSONReader.flatStrings` without `JSONDecoder` (which
/// spent 15–25 µs on each). Any other body (a nested value, a number, a repeated name, a lone
/// surrogate, invalid UTF-8, trailing bytes) is decoded by `JSONDecoder` as before, and so is one
/// for which `init(flat:)` returns nil (a required member missing or null), so every error a
/// client sees, and every unusual body that is accepted, is exactly what it was.
protocol FlatJSONDecodable: Decodable {
    init?(flat members: [String: String?])
}
