import GatehouseContracts
import IdentityCore
import IdentityService
import Testing

@Suite struct IdentityErrorTests {
    @Test func everyCaseHasItsStableCode() {
        #expect(IdentityError.invalidEmail(reason: "x").code.rawValue == "invalid_email")
        #expect(IdentityError.weakPassword([.tooShort, .common]).rpcError.details["reasons"] == "too_short,common_password")
        #expect(IdentityError.emailExists.code.rawValue == "email_exists")
        #expect(IdentityError.invalidCredentials.code.rawValue == "invalid_credentials")
        #expect(IdentityError.userDisabled.code.rawValue == "user_disabled")
        #expect(IdentityError.userNotFound.code.rawValue == "user_not_found")
        #expect(IdentityError.versionConflict(current: 3).rpcError.details["currentVersion"] == "3")
        #expect(IdentityError.invalidArgument(field: "f", reason: "r").code.rawValue == "invalid_argument")
        #expect(IdentityError.overloaded.code.rawValue == "overloaded")
        let storage = IdentityError.storage(cause: "SQLITE_IOERR secret path")
        #expect(storage.code.rawValue == "internal")
        #expect(!storage.rpcError.message.contains("SQLITE"))
    }
}
