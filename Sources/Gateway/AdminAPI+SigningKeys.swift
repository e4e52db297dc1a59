import Foundation
import GatehouseContracts
import GatehouseSupport
import Hummingbird
import Logging

// `POST /admin/v1/signing-keys/rotate` (issue 35 §5): the token service makes a new JWT signing
// key, published at once, and audits it with the admin key as the actor.
extension AdminRoutes {
    /// `POST /admin/v1/signing-keys/rotate` (signing_keys): 200 `{kid, activatesAt, previousKid,
    /// previousRetiresAt, publishedKids}`. No body is read.
    @Sendable func rotateSigningKeys(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let actor = try await authorize(request, AdminKey.Scope.signingKeys)
        let rotated: RotateKeysResponse
        do {
            rotated = try await call(tokens, TokenAPI.rotateKeys, RotateKeysRequest(actor: actor))
        } catch let error as RPCError where error.code == .permissionDenied {
            // The token role does not know the identity service's key: a configuration fault.
            logger.error("the token service refused token.rotateKeys from the identity service: give the token role the identity service's public key (GATEHOUSE_IDENTITY_PUBLIC_KEY_FILE)")
            throw GatewayError(.internal, detail: "The token service refused the identity service's key; see the identity service's log.")
        }
        var w = JSONObjectWriter()
        w.string("kid", rotated.kid)
        w.string("activatesAt", rotated.activatesAt.map(Self.preciseTime))
        w.string("previousKid", rotated.previousKid.isEmpty ? nil : rotated.previousKid)
        w.string("previousRetiresAt", rotated.previousRetiresAt.map(Self.preciseTime))
        w.strings("publishedKids", rotated.publishedKids)
        return Self.json(.ok, w.finish())
    }
}
