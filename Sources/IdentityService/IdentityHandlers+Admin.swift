import Foundation
import GatehouseContracts
import IdentityCore
import ProtoCodec

// Administrative methods (`gatehouse users ...`) and the settings merge patch of `updateProfile`.
extension IdentityHandlers {
    /// Sets a user's custom claims (`identity.setCustomClaims`): a JSON object of at most 1,000
    /// bytes without reserved names (`CustomClaims`); "" or `{}` clears them. The token service
    /// reads them at each refresh (`claimsForSession`), so they are in the user's access tokens
    /// from the next refresh on. Publishes `user.updated`.
    public func setCustomClaims(_ request: SetCustomClaimsRequest) async throws -> User {
        let id = try Self.validID(request.userID)
        let claims = try CustomClaims.validated(request.claimsJSON)
        let user = try await store.update(id: id, expectedVersion: nil, now: clock.now) { $0.customClaimsJSON = claims }
        let event = UserEvent(userID: user.id.rawValue, version: user.version, occurredAt: user.updatedAt)
        do {
            await events.publish(topic: IdentityAPI.Topic.userUpdated, payload: try ProtobufEncoder().encode(event))
        } catch {
            logger.warning("event \(IdentityAPI.Topic.userUpdated) does not encode: \(error)")
        }
        return User(user)
    }

    /// The checked merge patch of `updateProfile` (nil when none), read before the store is
    /// touched; refused together with a replacing `settingsJSON`.
    static func validSettingsPatch(_ text: String?, replacing settings: String?) throws -> JSONTree? {
        guard let text else { return nil }
        guard settings == nil else {
            throw IdentityError.invalidArgument(field: "settingsPatchJSON", reason: "give either settingsJSON or settingsPatchJSON, not both")
        }
        return try SettingsDocument.patch(text)
    }
}
