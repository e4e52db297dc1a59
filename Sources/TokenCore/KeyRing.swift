import Crypto
import Foundation
import JWTKit
import Synchronization
import _CryptoExtras
import GatehouseSupport

/// The published signing keys: the active one signs, every published one verifies. Signing
/// and verification go through jwt-kit; the verifier pins each `kid` to its key's algorithm.
public final class KeyRing: Sendable {
    /// A key with the time it stops being published.
    public struct Entry: Sendable, Hashable {
        /// The key: its algorithm, `kid`, public JWK and private material.
        public let key: SigningKey
        /// When the key stops being published (nil while it may still sign or verify).
        public let retireAfter: Date?
        /// An entry for `key`, published until `retireAfter` (nil: no end yet).
        public init(key: SigningKey, retireAfter: Date?) {
            self.key = key
            self.retireAfter = retireAfter
        }
    }

    /// Verifies (every published key). Signing does not go through jwt-kit: see `sign`.
    private let collection = JWTKeyCollection()
    private let state = Mutex<(active: String, entries: [String: Entry], signer: JWSSigner?)>(("", [:], nil))

    /// An empty ring: it signs and verifies nothing until `load`.
    public init() {}

    /// Replaces the published keys; `active` signs from now on.
    public func load(active: SigningKey, others: [Entry]) async throws {
        for entry in others { try await entry.key.addSigner(to: collection) }
        try await active.addSigner(to: collection)
        let signer = try JWSSigner(active)
        var entries: [String: Entry] = [:]
        for entry in others { entries[entry.key.kid] = entry }
        entries[active.kid] = Entry(key: active, retireAfter: nil)
        state.withLock { $0 = (active.kid, entries, signer) }
    }

    /// The active key's id.
    public var activeKid: String { state.withLock { $0.active } }

    /// The algorithm pinned to `kid`, if it is published at `now` (a retired key verifies nothing,
    /// even before the next reload drops it).
    public func algorithm(for kid: String, at now: Date) -> SigningAlgorithm? {
        state.withLock { state in
            guard let entry = state.entries[kid], entry.retireAfter.map({ $0 > now }) ?? true else { return nil }
            return entry.key.algorithm
        }
    }

    /// Keys still published at `now`.
    public func published(at now: Date) -> [SigningKey] {
        state.withLock { state in
            state.entries.values.filter { $0.retireAfter.map { $0 > now } ?? true }.map(\.key).sorted { $0.kid < $1.kid }
        }
    }

    /// The JWKS document (RFC 7517) of the keys published at `now`.
    public func jwksJSON(at now: Date) -> String {
        let keys = published(at: now).map(\.jwk)
        let data = (try? JSONSerialization.data(withJSONObject: ["keys": keys], options: [.sortedKeys])) ?? Data("{\"keys\":[]}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// Signs `claims` with the active key (`typ: JWT`, `alg` and `kid` set).
    ///
    /// The JWS is assembled here (RFC 7515 compact form: the header's base64url made once per
    /// key, the payload from `AccessClaims.jsonBytes()`, the signature from swift-crypto) rather
    /// than by jwt-kit, whose signing path re-encodes the header and payload with `JSONEncoder`
    /// and copies the input several times: 82 µs per ES256 token through jwt-kit against about
    /// 30 here, most of it the P-256 signature itself. jwt-kit still verifies every token
    /// (`verifySignature`, and the tests check tokens from here against jwt-kit and PyJWT).
    public func sign(_ claims: AccessClaims) throws -> String {
        guard let signer = state.withLock({ $0.signer }) else { throw SigningKeyError.noActiveKey }
        return try signer.sign(claims.jsonBytes())
    }

    /// Verifies the signature of `token` with the key its `kid` names, after checking that the
    /// header's `alg` is that key's algorithm. Time, issuer and audience are checked by `TokenVerifier`.
    func verifySignature(_ token: String, kid: String) async throws -> AccessClaims {
        try await collection.verify(token, as: AccessClaims.self)
    }
}

/// Checks access tokens: size, header, pinned algorithm, signature, issuer, audience and time.
public struct TokenVerifier: Sendable {
    /// The published keys the signatures are checked with.
    public let keys: KeyRing
    /// The `iss` a token must carry.
    public let issuer: String
    /// The `aud` a token must carry.
    public let audience: String
    /// Clock skew tolerated on `exp`, `nbf` and `iat`.
    public let leeway: TimeInterval
    /// Tokens longer than this are refused before parsing.
    public static let maxTokenLength = 8192

    /// A verifier; `leeway` is clamped to 0…120 seconds.
    public init(keys: KeyRing, issuer: String, audience: String, leeway: TimeInterval = 30) {
        self.keys = keys
        self.issuer = issuer
        self.audience = audience
        self.leeway = min(max(0, leeway), 120)
    }

    /// The claims of `token` if it verifies at `now`; throws
    /// `TokenError.invalidToken` (with why) or `.tokenExpired`.
    public func verify(_ token: String, now: Date) async throws -> AccessClaims {
        guard token.utf8.count <= Self.maxTokenLength else { throw TokenError.invalidToken("too long") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts.allSatisfy({ !$0.isEmpty }) else { throw TokenError.invalidToken("not a signed JWT") }
        guard let headerData = Base64URL.decode(parts[0]),
            let header = try? JSONDecoder().decode([String: JSONValue].self, from: headerData)
        else { throw TokenError.invalidToken("the header is not JSON") }
        guard case .string(let alg)? = header["alg"] else { throw TokenError.invalidToken("no algorithm") }
        // RFC 7515 §4.1.11: extensions we do not understand must be refused.
        guard header["crit"] == nil else { throw TokenError.invalidToken("critical header extensions are not supported") }
        guard case .string(let kid)? = header["kid"], kid.count <= 128,
            kid.utf8.allSatisfy({ $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") })
        else { throw TokenError.invalidToken("no valid key id") }
        guard let pinned = keys.algorithm(for: kid, at: now) else { throw TokenError.invalidToken("unknown key") }
        guard alg == pinned.rawValue else { throw TokenError.invalidToken("the algorithm does not match the key") }
        let claims: AccessClaims
        do { claims = try await keys.verifySignature(token, kid: kid) } catch {
            throw TokenError.invalidToken("the signature or payload is not valid")
        }
        guard claims.iss == issuer else { throw TokenError.invalidToken("wrong issuer") }
        guard claims.aud == audience else { throw TokenError.invalidToken("wrong audience") }
        let t = now.timeIntervalSince1970
        if let nbf = claims.nbf, t + leeway < Double(nbf) { throw TokenError.invalidToken("not valid yet") }
        guard t + leeway >= Double(claims.iat) else { throw TokenError.invalidToken("issued in the future") }
        guard t < Double(claims.exp) + leeway else { throw TokenError.tokenExpired }
        return claims
    }
}

extension UInt8 {
    var isASCIIAlphanumeric: Bool {
        (self >= 0x30 && self <= 0x39) || (self >= 0x41 && self <= 0x5A) || (self >= 0x61 && self <= 0x7A)
    }
}

/// Signs JWS compact tokens with one key: `BASE64URL(header).BASE64URL(payload).BASE64URL(signature)`.
struct JWSSigner: Sendable {
    enum Key: Sendable {
        case es256(P256.Signing.PrivateKey)
        case eddsa(Curve25519.Signing.PrivateKey)
        case rs256(_RSA.Signing.PrivateKey)
    }

    let key: Key
    /// `BASE64URL({"alg":…,"typ":"JWT","kid":…}) + "."`, the same for every token of this key.
    let headerPrefix: [UInt8]

    init(_ signingKey: SigningKey) throws {
        switch signingKey.algorithm {
        case .es256:
            key = .es256(try P256.Signing.PrivateKey(pemRepresentation: signingKey.privateMaterial))
        case .eddsa:
            guard let raw = Base64URL.decode(signingKey.privateMaterial) else { throw SigningKeyError.corrupt }
            key = .eddsa(try Curve25519.Signing.PrivateKey(rawRepresentation: raw))
        case .rs256:
            key = .rs256(try _RSA.Signing.PrivateKey(pemRepresentation: signingKey.privateMaterial))
        }
        var header = JSONObjectWriter()
        header.string("alg", signingKey.algorithm.rawValue)
        header.string("typ", "JWT")
        header.string("kid", signingKey.kid)
        headerPrefix = Array(Base64URL.encode(header.finish()).utf8) + [UInt8(ascii: ".")]
    }

    /// The compact JWS of `payload` (JSON bytes).
    func sign(_ payload: [UInt8]) throws -> String {
        var input = headerPrefix
        input.reserveCapacity(headerPrefix.count + (payload.count * 4 + 2) / 3 + 1 + 344)
        Base64URL.append(payload, to: &input)
        let signature: Data
        switch key {
        case .es256(let key):
            // JWS (RFC 7518 §3.4) wants R || S, 32 bytes each: swift-crypto's raw representation.
            signature = try key.signature(for: input).rawRepresentation
        case .eddsa(let key):
            signature = try key.signature(for: input)
        case .rs256(let key):
            signature = try key.signature(for: input, padding: .insecurePKCS1v1_5).rawRepresentation
        }
        input.append(UInt8(ascii: "."))
        Base64URL.append(signature, to: &input)
        return String(decoding: input, as: UTF8.self)
    }
}
