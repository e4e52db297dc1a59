import Crypto
import Foundation
import GatehouseSupport

/// Signs the `provider` scenario's ID tokens: ES256 with a P-256 key the server trusts as
/// `google.com`'s (its JWKS from `jwks`), issuer `https://accounts.google.com`, a fresh `jti`
/// each, valid ten minutes. A test key of a load run, never a real provider's.
public struct ProviderSigner: Sendable {
    /// The key id in the tokens' header and the JWKS.
    public static let keyID = "gatehouse-load"
    let key: P256.Signing.PrivateKey

    /// A signer with the key in `pem`; nil when it is not a P-256 private key in PEM.
    public init?(pem: String) {
        guard let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) else { return nil }
        self.key = key
    }

    /// A new random key, as PEM (for `--print-provider-jwks` to write).
    public static func newKeyPEM() -> String { P256.Signing.PrivateKey().pemRepresentation }

    /// The JWKS publishing the key's public half.
    public var jwks: String {
        let raw = key.publicKey.rawRepresentation
        let x = Base64URL.encode(raw.prefix(32)), y = Base64URL.encode(raw.suffix(32))
        return #"{"keys":[{"kty":"EC","crv":"P-256","use":"sig","alg":"ES256","kid":"\#(Self.keyID)","x":"\#(x)","y":"\#(y)"}]}"#
    }

    /// A signed ID token for `subject` with a verified `email`, issued now for `audience`.
    func idToken(subject: String, email: String, audience: String) -> String {
        let now = Int(Date().timeIntervalSince1970)
        let header = Base64URL.encode(Data(#"{"alg":"ES256","kid":"\#(Self.keyID)","typ":"JWT"}"#.utf8))
        let claims = #"{"iss":"https://accounts.google.com","aud":"\#(audience)","sub":"\#(subject)","email":"\#(email)","email_verified":true,"iat":\#(now),"exp":\#(now + 600),"jti":"\#(UUID().uuidString)"}"#
        let input = header + "." + Base64URL.encode(Data(claims.utf8))
        let signature = (try? key.signature(for: Data(input.utf8)).rawRepresentation) ?? Data()
        return input + "." + Base64URL.encode(signature)
    }
}
