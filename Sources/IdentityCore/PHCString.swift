import Foundation

/// A password hash in the PHC string format:
/// `$<id>[$v=<version>][$<param>=<value>(,<param>=<value>)*][$<salt>[$<hash>]]`,
/// salt and hash in standard Base64 without padding (`B64` of the PHC spec).
///
/// Parsing is strict about structure and lenient about Base64 padding and passlib's `.` for `+`
/// (its "ab64"), so hashes imported from passlib verify.
public struct PHCString: Sendable, Hashable, CustomStringConvertible {
    /// The algorithm id, e.g. `argon2id`, `scrypt`.
    public var id: String
    /// The `v=` version, when present.
    public var version: Int?
    /// The parameters in order, e.g. `[("m", "19456"), ("t", "2"), ("p", "1")]`.
    public var parameters: [Parameter]
    /// The salt's bytes (empty when the string has none).
    public var salt: [UInt8]
    /// The hash's bytes (empty when the string has none).
    public var hash: [UInt8]

    /// One `name=value` parameter.
    public struct Parameter: Sendable, Hashable {
        /// The parameter's name, e.g. `m`.
        public var name: String
        /// The parameter's value as written, e.g. `19456`.
        public var value: String
        /// The parameter `name=value`.
        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    /// A hash with every part given; `description` writes it in the PHC format.
    public init(id: String, version: Int? = nil, parameters: [Parameter] = [], salt: [UInt8] = [], hash: [UInt8] = []) {
        self.id = id
        self.version = version
        self.parameters = parameters
        self.salt = salt
        self.hash = hash
    }

    /// The value of parameter `name`, if present.
    public subscript(name: String) -> String? { parameters.first(where: { $0.name == name })?.value }

    /// An integer parameter, if present and numeric.
    public func integer(_ name: String) -> UInt64? { self[name].flatMap { UInt64($0) } }

    /// Parses `string`; nil when it is not a well-formed PHC string.
    public init?(_ string: String) {
        guard string.utf8.count <= 1024, string.hasPrefix("$") else { return nil }
        // ASCII (every hash a tool writes) is split by bytes, which for ASCII is the same as by
        // Characters, at a fraction of the cost (an import checks every user's hash).
        let ascii = string.utf8.allSatisfy { $0 < 0x80 }
        var fields =
            ascii
            ? string.utf8.split(separator: UInt8(ascii: "$"), omittingEmptySubsequences: false).dropFirst().map { String(Substring($0)) }
            : string.split(separator: "$", omittingEmptySubsequences: false).dropFirst().map(String.init)
        guard let id = fields.first, !id.isEmpty, id.utf8.count <= 32,
            id.utf8.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == UInt8(ascii: "-") })
        else { return nil }
        fields.removeFirst()
        self.id = id
        self.version = nil
        self.parameters = []
        self.salt = []
        self.hash = []
        if let first = fields.first, first.hasPrefix("v=") {
            guard let v = Int(first.dropFirst(2)), v >= 0 else { return nil }
            version = v
            fields.removeFirst()
        }
        // A parameter list has `=` inside; Base64 may only end with `=` padding.
        if let first = fields.first, ascii ? first.utf8.contains(UInt8(ascii: "=")) : first.contains("="), !first.hasSuffix("=") {
            for pair in first.split(separator: ",", omittingEmptySubsequences: false) {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else { return nil }
                parameters.append(Parameter(String(parts[0]), String(parts[1])))
            }
            fields.removeFirst()
        }
        guard fields.count <= 2 else { return nil }
        if fields.count >= 1 {
            guard let s = Self.decodeBase64(fields[0]) else { return nil }
            salt = s
        }
        if fields.count == 2 {
            guard let h = Self.decodeBase64(fields[1]), !h.isEmpty else { return nil }
            hash = h
        }
    }

    /// The PHC string.
    public var description: String {
        var out = "$" + id
        if let version { out += "$v=\(version)" }
        if !parameters.isEmpty { out += "$" + parameters.map { "\($0.name)=\($0.value)" }.joined(separator: ",") }
        if !salt.isEmpty || !hash.isEmpty { out += "$" + Self.encodeBase64(salt) }
        if !hash.isEmpty { out += "$" + Self.encodeBase64(hash) }
        return out
    }

    /// Standard Base64 without padding.
    public static func encodeBase64(_ bytes: [UInt8]) -> String {
        var s = Data(bytes).base64EncodedString()
        while s.hasSuffix("=") { s.removeLast() }
        return s
    }

    /// Decodes Base64 with or without padding; `.` is read as `+` (passlib's ab64).
    public static func decodeBase64(_ text: String) -> [UInt8]? {
        // Byte by byte: the alphabet is ASCII (Character properties and NSString's replacing
        // were most of the time an import spent checking a hash's form).
        var bytes = Array(text.utf8)
        for index in bytes.indices {
            switch bytes[index] {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "="):
                continue
            case UInt8(ascii: "."): bytes[index] = UInt8(ascii: "+")
            default: return nil
            }
        }
        while bytes.last == UInt8(ascii: "=") { bytes.removeLast() }
        guard bytes.count % 4 != 1 else { return nil }
        bytes.append(contentsOf: repeatElement(UInt8(ascii: "="), count: (4 - bytes.count % 4) % 4))
        return Data(base64Encoded: Data(bytes)).map { Array($0) }
    }
}
