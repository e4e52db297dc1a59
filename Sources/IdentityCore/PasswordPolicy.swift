import Foundation

/// The password policy, after NIST SP 800-63B §3.1.1.2: a length range, a blocklist of common
/// passwords, no composition rules.
///
/// Passwords are normalized with Unicode NFKC before they are checked or hashed. Length is
/// counted in Unicode scalars (code points) of the normalized form, as 800-63B asks
/// ("each Unicode code point SHALL be counted as a single character").
public struct PasswordPolicy: Sendable, Hashable {
    /// Why a password is refused. Raw values travel in `weak_password` details.
    public enum Violation: String, Sendable, Hashable, CaseIterable {
        case empty
        case tooShort = "too_short"
        case tooLong = "too_long"
        /// On the list of the 10,000 most common passwords.
        case common = "common_password"
        /// The same as the email address or its local part.
        case matchesEmail = "matches_email"
        /// Contains U+FFFD or NUL: the mark of a broken encoding, not something typed.
        case invalidCharacters = "invalid_characters"
    }

    /// The fewest scalars accepted (at least 8 by default; NIST's floor).
    public var minLength: Int
    /// The most scalars accepted.
    public var maxLength: Int

    /// A policy of `minLength` to `maxLength` scalars; the minimum
    /// is at least 1 and the maximum at least the minimum.
    public init(minLength: Int = 8, maxLength: Int = 256) {
        self.minLength = max(1, minLength)
        self.maxLength = max(self.minLength, maxLength)
    }

    /// The NFKC form of `password`, which is what gets hashed.
    public static func normalize(_ password: String) -> String {
        password.precomposedStringWithCompatibilityMapping
    }

    /// Whether `password` is certainly over the maximum, judged from its byte count alone, so a
    /// 1 MB input is refused without being normalized. The bound is loose on purpose: NFKC
    /// composition can shrink a few scalars into one, so only inputs far over the limit
    /// (72 bytes per allowed character) are cut here; the exact check follows normalization.
    public func isObviouslyTooLong(_ password: String) -> Bool {
        password.utf8.count > maxLength * 4 * 18
    }

    /// Checks `password` (not yet normalized) and returns every violation, empty when acceptable.
    /// `email` (normalized), when given, is a context word the password must not equal.
    public func violations(of password: String, email: String? = nil) -> [Violation] {
        if password.isEmpty { return [.empty] }
        if isObviouslyTooLong(password) { return [.tooLong] }
        let normalized = Self.normalize(password)
        var result: [Violation] = []
        let length = normalized.unicodeScalars.count
        if length < minLength { result.append(.tooShort) }
        if length > maxLength { result.append(.tooLong) }
        if normalized.unicodeScalars.contains(where: { $0 == "\u{FFFD}" || $0 == "\u{0}" }) {
            result.append(.invalidCharacters)
        }
        if length <= maxLength {
            if CommonPasswords.contains(normalized) { result.append(.common) }
            if let email {
                let lower = normalized.lowercased()
                let local = email.split(separator: "@").first.map(String.init) ?? email
                if lower == email || lower == local { result.append(.matchesEmail) }
            }
        }
        return result
    }

    /// Returns the normalized password, or throws `IdentityError.weakPassword` with every violation.
    public func validate(_ password: String, email: String? = nil) throws -> String {
        let found = violations(of: password, email: email)
        guard found.isEmpty else { throw IdentityError.weakPassword(found) }
        return Self.normalize(password)
    }
}
