import Foundation

/// The text of one top-level member of a JSON object, byte for byte as the client sent it, so a
/// value passed on to a service (the settings merge patch of `PATCH /v1/me`) keeps its `null`s,
/// numbers and booleans exactly. Reads a body already checked to be JSON (by its decoder); nil
/// when the member is absent or the body is not an object.
enum RawJSONMember {
    static func value(named name: String, in body: some Collection<UInt8>) -> [UInt8]? {
        let bytes = Array(body)
        var i = 0
        func skipWhitespace() {
            while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D { i += 1 }
        }
        /// Moves past the string starting at `i` (a quote); returns its raw inner bytes.
        func skipString() -> ArraySlice<UInt8>? {
            let start = i + 1
            i += 1
            while i < bytes.count {
                if bytes[i] == UInt8(ascii: "\\") {
                    i += 2
                } else if bytes[i] == UInt8(ascii: "\"") {
                    i += 1
                    return bytes[start..<(i - 1)]
                } else {
                    i += 1
                }
            }
            return nil
        }
        /// Moves past the value starting at `i`.
        func skipValue() -> Bool {
            guard i < bytes.count else { return false }
            if bytes[i] == UInt8(ascii: "\"") { return skipString() != nil }
            if bytes[i] == UInt8(ascii: "{") || bytes[i] == UInt8(ascii: "[") {
                var depth = 0
                while i < bytes.count {
                    switch bytes[i] {
                    case UInt8(ascii: "\""):
                        guard skipString() != nil else { return false }
                        continue
                    case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                    case UInt8(ascii: "}"), UInt8(ascii: "]"):
                        depth -= 1
                        if depth == 0 {
                            i += 1
                            return true
                        }
                    default: break
                    }
                    i += 1
                }
                return false
            }
            // A number or a literal: up to the next delimiter.
            while i < bytes.count, ![UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 0x20, 0x09, 0x0A, 0x0D].contains(bytes[i]) { i += 1 }
            return true
        }
        skipWhitespace()
        guard i < bytes.count, bytes[i] == UInt8(ascii: "{") else { return nil }
        i += 1
        var found: [UInt8]?
        while true {
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\""), let rawName = skipString() else { return found }
            let memberName: String
            if rawName.contains(UInt8(ascii: "\\")) {
                memberName = (try? JSONDecoder().decode(String.self, from: Data([UInt8(ascii: "\"")] + rawName + [UInt8(ascii: "\"")]))) ?? ""
            } else {
                memberName = String(decoding: rawName, as: UTF8.self)
            }
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { return found }
            i += 1
            skipWhitespace()
            let start = i
            guard skipValue() else { return found }
            if memberName == name { found = Array(bytes[start..<i]) }  // a repeated member: the last one
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ",") else { return found }
            i += 1
        }
    }
}
