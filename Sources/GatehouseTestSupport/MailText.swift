import Foundation

/// The password reset code in a mail's text: its one line of 43 base64url characters (32
/// random bytes), or nil.
public func resetCode(in text: String) -> String? {
    text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first { line in
        line.utf8.count == 43 && line.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || $0 == "-" || $0 == "_" }
    }
}
