import Crypto
import Foundation

/// How a token store's secrets are sealed at rest with the key-encryption key: AES-256-GCM, the
/// nonce, ciphertext and tag combined. One rule for the service (which seals) and the rotation
/// of the key (which opens with the old key and seals with the new one).
public enum SecretSealing {
    /// Why a secret could not be sealed.
    public struct Failure: Error, Sendable {}

    /// `data` sealed with `key`; `data` itself without a key.
    public static func seal(_ data: Data, with key: SymmetricKey?) throws(Failure) -> Data {
        guard let key else { return data }
        guard let combined = try? AES.GCM.seal(data, using: key).combined else { throw Failure() }
        return combined
    }

    /// `sealed` opened with `key`, or nil when it does not open with it.
    public static func open(_ sealed: Data, with key: SymmetricKey) -> Data? {
        guard let box = try? AES.GCM.SealedBox(combined: sealed) else { return nil }
        return try? AES.GCM.open(box, using: key)
    }
}
