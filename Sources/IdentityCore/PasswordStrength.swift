import Foundation

/// A password strength estimate for clients that show a meter: a zxcvbn-like score from 0
/// (trivially guessable) to 4 (very strong), with reasons a client can show.
///
/// This is a light estimator, not zxcvbn: it starts from length × log2(character pool) and takes
/// bits off for what guessers try first — the common-password list (whole and as a part),
/// repeated characters, sequences (`abc`, `321`, keyboard rows) and pieces of the user's email or
/// name. Pure; cost is bounded by the policy's maximum length.
public struct PasswordStrength: Sendable, Hashable {
    /// A reason the score is not higher, with a stable code and an English message.
    public struct Reason: Sendable, Hashable {
        /// A stable code, e.g. `common_password`, `short`, `sequence`, `contains_user_data`.
        public var code: String
        /// English text a client may show.
        public var message: String
        /// A reason with its code and message.
        public init(code: String, message: String) {
            self.code = code
            self.message = message
        }
    }

    /// 0 … 4.
    public var score: Int
    /// The estimated entropy in bits after penalties.
    public var bits: Double
    /// Why the score is not higher, and what would help; empty when nothing held it back.
    public var reasons: [Reason]

    /// Estimates the strength of `password`. `userInputs` are words tied to the user (email,
    /// display name) that make a password weaker when it contains them.
    public static func estimate(_ rawPassword: String, userInputs: [String] = [], maxLength: Int = 256) -> PasswordStrength {
        if rawPassword.isEmpty {
            return PasswordStrength(score: 0, bits: 0, reasons: [.init(code: "empty", message: "Enter a password.")])
        }
        if rawPassword.utf8.count > maxLength * 4 * 18 {
            return PasswordStrength(score: 0, bits: 0, reasons: [.init(code: "too_long", message: "This password is too long.")])
        }
        let password = PasswordPolicy.normalize(rawPassword)
        let scalars = Array(password.lowercased().unicodeScalars)
        if scalars.count > maxLength {
            return PasswordStrength(score: 0, bits: 0, reasons: [.init(code: "too_long", message: "This password is too long.")])
        }
        var reasons: [Reason] = []
        if CommonPasswords.contains(password) {
            return PasswordStrength(score: 0, bits: 0, reasons: [
                .init(code: "common_password", message: "This is one of the most common passwords."),
                .init(code: "use_more_words", message: "Use a few words that are not commonly used together."),
            ])
        }

        // Character pool.
        var lower = false, upper = false, digit = false, symbol = false, other = false
        for s in password.unicodeScalars {
            switch s.value {
            case 0x61...0x7A: lower = true
            case 0x41...0x5A: upper = true
            case 0x30...0x39: digit = true
            case 0x20...0x7E: symbol = true
            default: other = true
            }
        }
        var pool = 0
        if lower { pool += 26 }
        if upper { pool += 26 }
        if digit { pool += 10 }
        if symbol { pool += 33 }
        if other { pool += 100 }
        let perChar = log2(Double(max(pool, 2)))

        // Each character costs full bits unless it is predictable from the one before.
        var effective = 0.0
        var repeats = 0, sequences = 0
        for (i, s) in scalars.enumerated() {
            if i > 0 {
                let prev = scalars[i - 1]
                if prev == s { repeats += 1; effective += 1; continue }
                let d = Int(s.value) - Int(prev.value)
                if abs(d) == 1 || isKeyboardNeighbour(prev, s) { sequences += 1; effective += 1.5; continue }
            }
            effective += perChar
        }
        if repeats * 4 >= scalars.count && repeats > 0 {
            reasons.append(.init(code: "repeats", message: "Repeated characters like \"aaa\" are easy to guess."))
        }
        if sequences * 4 >= scalars.count && sequences > 0 {
            reasons.append(.init(code: "sequence", message: "Sequences like \"abc\", \"654\" or \"qwerty\" are easy to guess."))
        }

        // Common passwords inside the password: each found part counts as one word (~13 bits).
        let lowered = String(String.UnicodeScalarView(scalars))
        if let part = longestCommonPart(in: scalars), part.count >= 4 {
            let share = Double(part.count) / Double(scalars.count)
            effective -= share * Double(part.count) * perChar * 0.8
            effective += 13
            reasons.append(.init(code: "contains_common_password", message: "Avoid common passwords and words, even as part of a longer password."))
        }

        // The user's own data.
        for input in userInputs {
            for piece in input.lowercased().split(whereSeparator: { !$0.isLetter && !$0.isNumber }) where piece.count >= 3 {
                if lowered.contains(piece) {
                    effective -= Double(piece.count) * perChar * 0.8
                    effective += 4
                    reasons.append(.init(code: "contains_user_data", message: "Avoid your name or email address in your password."))
                    break
                }
            }
        }
        effective = max(0, effective)

        if scalars.count < 12 {
            reasons.append(.init(code: "short", message: "Longer passwords are stronger: try 12 characters or more."))
        }
        let score: Int
        switch effective {
        case ..<24: score = 0
        case ..<36: score = 1
        case ..<50: score = 2
        case ..<64: score = 3
        default: score = 4
        }
        if score < 3, !reasons.contains(where: { $0.code == "use_more_words" }) {
            reasons.append(.init(code: "use_more_words", message: "Add another word or two; uncommon words are better."))
        }
        return PasswordStrength(score: score, bits: effective, reasons: reasons)
    }

    private static let keyboardRows: [[Unicode.Scalar]] = ["`1234567890-=", "qwertyuiop[]\\", "asdfghjkl;'", "zxcvbnm,./"].map {
        Array($0.unicodeScalars)
    }

    private static func isKeyboardNeighbour(_ a: Unicode.Scalar, _ b: Unicode.Scalar) -> Bool {
        for row in keyboardRows {
            if let i = row.firstIndex(of: a), let j = row.firstIndex(of: b), abs(i - j) == 1 { return true }
        }
        return false
    }

    /// The longest substring (4 to 16 scalars) that is on the common-password list.
    private static func longestCommonPart(in scalars: [Unicode.Scalar]) -> [Unicode.Scalar]? {
        let n = scalars.count
        guard n >= 4 else { return nil }
        var length = min(16, n)
        while length >= 4 {
            var start = 0
            while start + length <= n {
                let slice = Array(scalars[start..<start + length])
                if CommonPasswords.set.contains(String(String.UnicodeScalarView(slice))) { return slice }
                start += 1
            }
            length -= 1
        }
        return nil
    }
}
