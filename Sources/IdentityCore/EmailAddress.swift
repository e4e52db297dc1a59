import Foundation

/// An email address as typed (trimmed) and in its normalized form, which is what uniqueness and
/// look-ups use.
///
/// Rules: surrounding whitespace is trimmed; no control characters, spaces or U+FFFD
/// (the mark of repaired invalid UTF-8) anywhere; exactly one unquoted `@` (quoted local parts
/// are not accepted); RFC 5321 limits of 64 octets for the local part and 254 for the whole
/// address (UTF-8 octets); the local part is RFC 5322 dot-atoms, with non-ASCII allowed as in
/// RFC 6531; the domain has at least two labels of 1–63 octets each, made of letters, digits and
/// hyphens (not at either end of a label). Internationalized domains are accepted in Unicode
/// form (no punycode conversion). The normalized form is NFKC + lowercased, local part included,
/// so addresses compare case-insensitively.
public struct EmailAddress: Sendable, Hashable, CustomStringConvertible {
    /// The address as the user typed it, trimmed.
    public let typed: String
    /// The canonical form: NFKC, lowercased.
    public let normalized: String

    /// RFC 5321's limit on the local part, in UTF-8 octets (typed and normalized).
    public static let maxLocalPartOctets = 64
    /// RFC 5321's limit on the whole address, in UTF-8 octets (typed and normalized).
    public static let maxOctets = 254

    /// Validates and normalizes `raw`. Throws `IdentityError.invalidEmail`.
    public init(_ raw: String) throws {
        // Bound the work before anything else: a megabyte of input is rejected at once.
        guard raw.utf8.count <= 4 * Self.maxOctets else { throw IdentityError.invalidEmail(reason: "too long") }
        // Printable ASCII (nearly every address) needs no trimming, no Unicode property look-ups
        // and no NFKC pass (NFKC leaves ASCII as it is): only the checks below.
        let printableASCII = raw.utf8.allSatisfy { $0 >= 0x21 && $0 <= 0x7E }
        let trimmed = printableASCII ? raw : raw.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { throw IdentityError.invalidEmail(reason: "empty") }
        guard trimmed.utf8.count <= Self.maxOctets else { throw IdentityError.invalidEmail(reason: "longer than 254 octets") }
        if !printableASCII {
            for scalar in trimmed.unicodeScalars {
                if scalar.value < 0x21 || scalar.value == 0x7F || scalar == "\u{FFFD}"
                    || scalar.properties.generalCategory == .control
                    || scalar.properties.generalCategory == .format
                    || scalar.properties.isWhitespace
                    || scalar.properties.generalCategory == .lineSeparator
                    || scalar.properties.generalCategory == .paragraphSeparator
                {
                    throw IdentityError.invalidEmail(reason: "contains a space or control character")
                }
            }
        }
        guard let at = trimmed.lastIndex(of: "@") else { throw IdentityError.invalidEmail(reason: "missing @") }
        let local = String(trimmed[..<at])
        let domain = String(trimmed[trimmed.index(after: at)...])
        try Self.checkLocalPart(local)
        try Self.checkDomain(domain)

        let normalizedLocal = printableASCII ? local.lowercased() : local.precomposedStringWithCompatibilityMapping.lowercased()
        let normalizedDomain = printableASCII ? domain.lowercased() : domain.precomposedStringWithCompatibilityMapping.lowercased()
        let normalized = normalizedLocal + "@" + normalizedDomain
        // NFKC can change lengths; the stored form must obey the limits too.
        guard normalizedLocal.utf8.count <= Self.maxLocalPartOctets, normalized.utf8.count <= Self.maxOctets else {
            throw IdentityError.invalidEmail(reason: "too long once normalized")
        }
        self.typed = trimmed
        self.normalized = normalized
    }

    /// The address as typed.
    public var description: String { typed }

    /// The normalized form of `raw`, or nil when it is not a valid address.
    public static func normalize(_ raw: String) -> String? { try? EmailAddress(raw).normalized }

    private static let atext: Set<UInt8> = Set("!#$%&'*+-/=?^_`{|}~".utf8)

    private static func checkLocalPart(_ local: String) throws {
        guard !local.isEmpty else { throw IdentityError.invalidEmail(reason: "empty local part") }
        guard local.utf8.count <= maxLocalPartOctets else {
            throw IdentityError.invalidEmail(reason: "local part longer than 64 octets")
        }
        guard local.first != ".", local.last != ".", !local.contains("..") else {
            throw IdentityError.invalidEmail(reason: "misplaced dot in the local part")
        }
        for byte in local.utf8 where byte < 0x80 {
            let ok = (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: ".") || atext.contains(byte)
            guard ok else { throw IdentityError.invalidEmail(reason: "the local part contains a character that is not allowed") }
        }
    }

    private static func checkDomain(_ domain: String) throws {
        guard !domain.isEmpty else { throw IdentityError.invalidEmail(reason: "empty domain") }
        let labels = domain.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count >= 2 else { throw IdentityError.invalidEmail(reason: "the domain needs a dot") }
        for label in labels {
            guard !label.isEmpty, label.utf8.count <= 63 else {
                throw IdentityError.invalidEmail(reason: "a domain label is empty or longer than 63 octets")
            }
            guard label.first != "-", label.last != "-" else {
                throw IdentityError.invalidEmail(reason: "a domain label starts or ends with a hyphen")
            }
            for scalar in label.unicodeScalars {
                let ok: Bool
                if scalar.isASCII {
                    let v = scalar.value
                    ok = (v >= 0x30 && v <= 0x39) || (v >= 0x41 && v <= 0x5A) || (v >= 0x61 && v <= 0x7A) || v == 0x2D
                } else {
                    let p = scalar.properties
                    ok = p.isAlphabetic || p.numericType != nil
                        || p.generalCategory == .nonspacingMark || p.generalCategory == .spacingMark
                }
                guard ok else { throw IdentityError.invalidEmail(reason: "the domain contains a character that is not allowed") }
            }
        }
        if let tld = labels.last, tld.allSatisfy(\.isNumber) {
            throw IdentityError.invalidEmail(reason: "the top-level domain is numeric")
        }
    }
}
