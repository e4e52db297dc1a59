// Contract golden test: the Swift message types of GatehouseContracts agree with
// proto/common.proto, envelope.proto, identity.proto and token.proto field by field.
// Tests/Interop/contracts.py fills every proto message with every field set ("populate");
// Swift decodes each into its type and encodes it again ("roundtrip"), and encodes its own
// populated fixture (ContractFixtures.swift, "swift") and lists its CodingKeys ("fields");
// contracts.py "check" then fails on a field Swift lost (missing in Swift, or another number or
// type), a field only Swift has, a fixture field left at its default, and a proto message missing
// from `contractTable`.
import Foundation
import GatehouseContracts
import GatehouseTestSupport
import ProtoCodec
import Testing

/// The contract files, relative to the repository root (test-only protos excluded).
private let contractProtos = ["proto/common.proto", "proto/envelope.proto", "proto/identity.proto", "proto/token.proto"]

/// One proto message and its Swift type, as two closures so the table can mix types.
struct ContractCase: Sendable {
    /// The message's full proto name, e.g. `gatehouse.identity.v1.User`.
    let protoName: String
    /// Decodes protobuf bytes as the Swift type and encodes the value again.
    let roundtrip: @Sendable ([UInt8]) throws -> [UInt8]
    /// Encodes the populated Swift fixture.
    let encodeFixture: @Sendable () throws -> [UInt8]
    /// The Swift type's field numbers and names (its CodingKeys), set or not in the fixture.
    let fields: @Sendable () throws -> [Int: String]

    /// The row for `protoName`, whose Swift type is `type`, populated as `fixture`.
    init<T: Codable & Sendable>(_ protoName: String, _ type: T.Type, _ fixture: T) {
        self.protoName = protoName
        roundtrip = { try ProtobufEncoder().encode(ProtobufDecoder().decode(T.self, from: $0)) }
        encodeFixture = { try ProtobufEncoder().encode(fixture) }
        fields = { try codingKeys(of: fixture) }
    }
}

/// Every message of the contract protos and its Swift type. A new proto message needs a row
/// here (contracts.py fails on a missing one) and a fixture in ContractFixtures.swift.
let contractTable: [ContractCase] = [
    // common.proto, envelope.proto
    ContractCase("gatehouse.v1.ClientInfo", ClientInfo.self, .contractFixture),
    ContractCase("gatehouse.v1.UserClaims", UserClaims.self, .contractFixture),
    ContractCase("gatehouse.v1.ClaimsForSessionRequest", ClaimsForSessionRequest.self, .contractFixture),
    ContractCase("gatehouse.v1.IssueSessionRequest", IssueSessionRequest.self, .contractFixture),
    ContractCase("gatehouse.v1.SessionTokens", SessionTokens.self, .contractFixture),
    ContractCase("gatehouse.v1.AuditEvent", AuditEvent.self, .contractFixture),
    ContractCase("gatehouse.v1.ListAuditRequest", ListAuditRequest.self, .contractFixture),
    ContractCase("gatehouse.v1.ListAuditResponse", ListAuditResponse.self, .contractFixture),
    ContractCase("gatehouse.v1.RequestHeader", RequestHeader.self, .contractFixture),
    ContractCase("gatehouse.v1.ReplyHeader", ReplyHeader.self, .contractFixture),
    ContractCase("gatehouse.v1.Error", RPCError.self, .contractFixture),
    // identity.proto
    ContractCase("gatehouse.identity.v1.User", User.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.AuthenticatedCaller", AuthenticatedCaller.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.SignUpRequest", SignUpRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.SignInAnonymouslyRequest", SignInAnonymouslyRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.SignInRequest", SignInRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.AuthResponse", AuthResponse.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.MigrationOutcome", MigrationOutcome.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.UpgradeAnonymousRequest", UpgradeAnonymousRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.ResumeSignInRequest", ResumeSignInRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.ProviderCredential", ProviderCredential.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.ProviderSignInRequest", ProviderSignInRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.UnlinkProviderRequest", UnlinkProviderRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.ProviderReauthenticateRequest", ProviderReauthenticateRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.AppleNotificationRequest", AppleNotificationRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.AppleNotificationResponse", AppleNotificationResponse.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.UserIdRequest", UserIDRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.UpdateProfileRequest", UpdateProfileRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.SetDisabledRequest", SetDisabledRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.SetCustomClaimsRequest", SetCustomClaimsRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.ImportedUser", ImportedUser.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.ImportedIdentity", ImportedIdentity.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.ImportUsersRequest", ImportUsersRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.ImportResult", ImportResult.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.ImportUsersResponse", ImportUsersResponse.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.ExportUsersRequest", ExportUsersRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.ExportUsersResponse", ExportUsersResponse.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.AdminKey", AdminKey.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.CreateAdminKeyRequest", CreateAdminKeyRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.CreateAdminKeyResponse", CreateAdminKeyResponse.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.AdminKeyList", AdminKeyList.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.AdminKeyIdRequest", AdminKeyIDRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.AuthenticateAdminKeyRequest", AuthenticateAdminKeyRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.AdminUser", AdminUser.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.ListUsersRequest", ListUsersRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.ListUsersResponse", ListUsersResponse.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.AdminUserRequest", AdminUserRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.AdminCreateUserRequest", AdminCreateUserRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.AdminUpdateUserRequest", AdminUpdateUserRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.AdminSetClaimsRequest", AdminSetClaimsRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.GenerateActionLinkRequest", GenerateActionLinkRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.ActionLink", ActionLink.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.PasswordStrengthRequest", PasswordStrengthRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.StrengthReason", StrengthReason.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.PasswordStrengthResponse", PasswordStrengthResponse.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.IdentityStats", IdentityStats.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.UserEvent", UserEvent.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.UserChange", UserChange.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.ChangeFeedHeartbeat", ChangeFeedHeartbeat.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.ListChangesRequest", ListChangesRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.ListChangesResponse", ListChangesResponse.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.UserChangesRequest", UserChangesRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.UserChangesResponse", UserChangesResponse.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.ReauthenticateRequest", ReauthenticateRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.ChangePasswordRequest", ChangePasswordRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.ChangeEmailRequest", ChangeEmailRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.CredentialChangeResponse", CredentialChangeResponse.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.DeleteAccountRequest", DeleteAccountRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.DeleteAccountResponse", DeleteAccountResponse.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.PasswordResetRequest", PasswordResetRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.ConfirmPasswordResetRequest", ConfirmPasswordResetRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.ConfirmPasswordResetResponse", ConfirmPasswordResetResponse.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.SendEmailVerificationRequest", SendEmailVerificationRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.SendEmailVerificationResponse", SendEmailVerificationResponse.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.EmailVerificationRequest", EmailVerificationRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.EmailCodeRequest", EmailCodeRequest.self, .contractFixture),
    ContractCase("gatehouse.identity.v1.EmailCodeResponse", EmailCodeResponse.self, .contractFixture),
    // token.proto
    ContractCase("gatehouse.token.v1.RefreshRequest", RefreshRequest.self, .contractFixture),
    ContractCase("gatehouse.token.v1.RevokeSessionRequest", RevokeSessionRequest.self, .contractFixture),
    ContractCase("gatehouse.token.v1.UserSessionsRequest", UserSessionsRequest.self, .contractFixture),
    ContractCase("gatehouse.token.v1.RevokedCount", RevokedCount.self, .contractFixture),
    ContractCase("gatehouse.token.v1.SessionInfo", SessionInfo.self, .contractFixture),
    ContractCase("gatehouse.token.v1.SessionList", SessionList.self, .contractFixture),
    ContractCase("gatehouse.token.v1.VerifyRequest", VerifyRequest.self, .contractFixture),
    ContractCase("gatehouse.token.v1.VerifiedClaims", VerifiedClaims.self, .contractFixture),
    ContractCase("gatehouse.token.v1.JWKSDocument", JWKSDocument.self, .contractFixture),
    ContractCase("gatehouse.token.v1.RotateKeysRequest", RotateKeysRequest.self, .contractFixture),
    ContractCase("gatehouse.token.v1.RotateKeysResponse", RotateKeysResponse.self, .contractFixture),
    ContractCase("gatehouse.token.v1.SessionRevokedEvent", SessionRevokedEvent.self, .contractFixture),
    ContractCase("gatehouse.token.v1.RevocationHeartbeat", RevocationHeartbeat.self, .contractFixture),
    ContractCase("gatehouse.token.v1.RevokedSession", RevokedSession.self, .contractFixture),
    ContractCase("gatehouse.token.v1.RevocationSnapshot", RevocationSnapshot.self, .contractFixture),
    ContractCase("gatehouse.token.v1.LastActivityRequest", LastActivityRequest.self, .contractFixture),
    ContractCase("gatehouse.token.v1.UserActivity", UserActivity.self, .contractFixture),
    ContractCase("gatehouse.token.v1.LastActivityResponse", LastActivityResponse.self, .contractFixture),
]

/// What contracts.py check reads for one message.
private struct CheckEntry: Encodable {
    /// Python's populated bytes decoded as the Swift type and encoded again (hex); nil when
    /// Python sent none or Swift could not decode them.
    var roundtrip: String?
    /// The Swift fixture's bytes (hex).
    var swift: String
    /// Field number (decimal) -> Swift CodingKey name, for every field of the Swift type.
    var fields: [String: String]
}

/// Runs contracts.py populate and check around Swift's decode, re-encode and fixtures.
@Suite("Contract golden: GatehouseContracts against proto/*.proto")
struct ContractGoldenTests {
    /// Every contract message round-trips through its Swift type, and every Swift fixture is
    /// exactly the proto's fields, all set.
    @Test func swiftTypesMatchTheProtosFieldByField() async throws {
        let names = contractTable.map(\.protoName)
        #expect(Set(names).count == names.count, "contractTable names a proto message twice")
        guard let generated = try await generatePythonModules(contractProtos) else { return }
        defer { try? FileManager.default.removeItem(at: generated) }

        let populated = try await python(["Tests/Interop/contracts.py", "populate", "--gen", generated.path])
        try #require(populated.status == 0, "contracts.py populate failed:\n\(populated.stdout)\(populated.stderr)")
        let pythonHex = try JSONDecoder().decode([String: String].self, from: Data(populated.stdout.utf8))

        // {full_name: {"roundtrip": hex, "swift": hex, "fields": {number: name}}}; a name Python did
        // not populate is sent without a roundtrip, and contracts.py reports it as not in the protos.
        var report: [String: CheckEntry] = [:]
        for row in contractTable {
            let fields = try row.fields().map { (String($0.key), $0.value) }
            var entry = CheckEntry(swift: hex(try row.encodeFixture()), fields: Dictionary(uniqueKeysWithValues: fields))
            if let hexString = pythonHex[row.protoName], let pythonBytes = bytes(hex: hexString) {
                do {
                    entry.roundtrip = hex(try row.roundtrip(pythonBytes))
                } catch {
                    Issue.record("\(row.protoName): Swift cannot decode Python's populated message: \(error)")
                }
            }
            report[row.protoName] = entry
        }
        let checked = try await python(
            ["Tests/Interop/contracts.py", "check", "--gen", generated.path], stdin: try JSONEncoder().encode(report))
        #expect(
            checked.status == 0 && checked.stdout.contains(" 0 mismatches"),
            "contracts.py check failed:\n\(checked.stdout)\(checked.stderr)")
    }
}
