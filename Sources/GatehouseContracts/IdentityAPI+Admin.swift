import Foundation

// Wire messages of the identity service's administrative methods (proto/identity.proto), used by
// the `gatehouse users` commands.

/// `identity.setCustomClaims` request (administrative).
public struct SetCustomClaimsRequest: Codable, Sendable, Hashable {
    /// The user whose custom claims to set.
    public var userID: String
    /// A JSON object of at most 1,000 bytes without reserved claim names; "" or `{}` clears them.
    public var claimsJSON: String

    /// A request to set `userID`'s custom claims to `claimsJSON`.
    public init(userID: String, claimsJSON: String) {
        self.userID = userID
        self.claimsJSON = claimsJSON
    }

    enum CodingKeys: Int, CodingKey { case userID = 1, claimsJSON = 2 }
}

extension IdentityAPI {
    /// Sets a user's custom claims, written into the access tokens minted for the user from the
    /// next refresh on (administrative: only the identity service's own key, i.e. the CLI).
    /// Errors: `invalid_argument` (naming a reserved claim, too large, not an object),
    /// `user_not_found`. Idempotent.
    public static let setCustomClaims = RPCMethod<SetCustomClaimsRequest, User>(name: "identity.setCustomClaims", idempotent: true)
}
