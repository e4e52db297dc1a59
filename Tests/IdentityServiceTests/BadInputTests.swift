import Foundation
import GatehouseContracts
import GatehouseSupport
import GatehouseTestSupport
import IdentityCore
import IdentityService
import ProtoCodec
import Testing
import RPCRouting
import IdentityPorts

/// Bad input for every field gets its stable error code and writes nothing.
@Suite struct BadInputTests {
    static let strong = "glacier lantern marmalade"
    static let megabyte = String(repeating: "p", count: 1_000_000)
    static let hundredKB = String(repeating: "n", count: 100_000)

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var request: SignUpRequest
        var code: ErrorCode
        var testDescription: String { name }
    }

    static let signUpCases: [Case] = [
        Case(name: "empty email", request: SignUpRequest(email: "", password: strong), code: .invalidEmail),
        Case(name: "email too long", request: SignUpRequest(email: String(repeating: "a", count: 250) + "@example.com", password: strong), code: .invalidEmail),
        Case(name: "email SQL", request: SignUpRequest(email: "x' OR '1'='1'; DROP TABLE users;--@example.com", password: strong), code: .invalidEmail),
        Case(name: "email control", request: SignUpRequest(email: "a\u{1}b@example.com", password: strong), code: .invalidEmail),
        Case(name: "email megabyte", request: SignUpRequest(email: megabyte, password: strong), code: .invalidEmail),
        Case(name: "empty password", request: SignUpRequest(email: "p@example.com", password: ""), code: .weakPassword),
        Case(name: "short password", request: SignUpRequest(email: "p@example.com", password: "x7#"), code: .weakPassword),
        Case(name: "1 MB password", request: SignUpRequest(email: "p@example.com", password: megabyte), code: .weakPassword),
        Case(name: "257-char password", request: SignUpRequest(email: "p@example.com", password: String(repeating: "z", count: 257)), code: .weakPassword),
        Case(name: "common password", request: SignUpRequest(email: "p@example.com", password: "letmein1"), code: .weakPassword),
        Case(name: "100 KB display name", request: SignUpRequest(email: "p@example.com", password: strong, displayName: hundredKB), code: .invalidArgument),
        Case(name: "257-char display name", request: SignUpRequest(email: "p@example.com", password: strong, displayName: String(repeating: "d", count: 257)), code: .invalidArgument),
        Case(name: "huge user agent", request: SignUpRequest(email: "p@example.com", password: strong, client: ClientInfo(userAgent: hundredKB)), code: .invalidArgument),
        Case(name: "bad ip", request: SignUpRequest(email: "p@example.com", password: strong, client: ClientInfo(ip: "1.2.3.4; DROP TABLE")), code: .invalidArgument),
        Case(name: "control char display name", request: SignUpRequest(email: "p@example.com", password: strong, displayName: "a\u{0}b"), code: .invalidArgument),
    ]

    @Test(arguments: signUpCases)
    func signUpRejects(_ c: Case) async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        await expectCode(c.code) { try await h.caller.call(IdentityAPI.signUp, c.request) }
        #expect(try await h.store.count() == 0)
        #expect(h.events.events.isEmpty)
        #expect(h.tokens.requests.isEmpty)
    }

    @Test func sqlMetacharactersInAValidPasswordAndNameAreJustText() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let reply = try await h.caller.call(
            IdentityAPI.signUp,
            SignUpRequest(email: "o'neil@example.com", password: "'; DROP TABLE users; --", displayName: "Robert'); DROP TABLE users;--"))
        #expect(reply.user.displayName == "Robert'); DROP TABLE users;--")
        _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "o'neil@example.com", password: "'; DROP TABLE users; --"))
        #expect(try await h.store.count() == 1)
    }

    @Test func signInBadInput() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        _ = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "si@example.com", password: Self.strong))
        await expectCode(.invalidEmail) { try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "", password: Self.strong)) }
        await expectCode(.invalidCredentials) { try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "si@example.com", password: Self.megabyte)) }
        await expectCode(.invalidCredentials) { try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "si@example.com", password: "' OR 1=1 --")) }
        #expect(try await h.store.user(normalizedEmail: "si@example.com")?.lastSignInAt == h.clock.now.roundedToMilliseconds)
    }

    @Test func updateProfileBadInput() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let created = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "up@example.com", password: Self.strong))
        let id = created.user.id
        let bad: [(UpdateProfileRequest, ErrorCode)] = [
            (UpdateProfileRequest(userID: ""), .invalidArgument),
            (UpdateProfileRequest(userID: "x'; DROP TABLE users;--"), .invalidArgument),
            (UpdateProfileRequest(userID: String(repeating: "a", count: 100)), .invalidArgument),
            (UpdateProfileRequest(userID: id, displayName: Self.hundredKB), .invalidArgument),
            (UpdateProfileRequest(userID: id, displayName: "bell\u{7}"), .invalidArgument),
            (UpdateProfileRequest(userID: id, photoURL: "javascript:alert(1)"), .invalidArgument),
            (UpdateProfileRequest(userID: id, photoURL: "ftp://example.com/a.png"), .invalidArgument),
            (UpdateProfileRequest(userID: id, photoURL: "https://example.com/" + String(repeating: "a", count: 2048)), .invalidArgument),
            (UpdateProfileRequest(userID: id, photoURL: "https:///nohost"), .invalidArgument),
            (UpdateProfileRequest(userID: id, photoURL: "https://exa mple.com/"), .invalidArgument),
            (UpdateProfileRequest(userID: id, settingsJSON: ""), .invalidArgument),
            (UpdateProfileRequest(userID: id, settingsJSON: "[1]"), .invalidArgument),
            (UpdateProfileRequest(userID: id, settingsJSON: "\"text\""), .invalidArgument),
            (UpdateProfileRequest(userID: id, settingsJSON: "{'single': 1}"), .invalidArgument),
            (UpdateProfileRequest(userID: id, settingsJSON: "{\"a\":\"" + String(repeating: "b", count: 16_400) + "\"}"), .invalidArgument),
            (UpdateProfileRequest(userID: id, displayName: "ok", expectedVersion: 0), .invalidArgument),
            (UpdateProfileRequest(userID: id, displayName: "ok", expectedVersion: 7), .versionConflict),
            (UpdateProfileRequest(userID: UserID.random().rawValue, displayName: "ok"), .userNotFound),
        ]
        for (request, code) in bad {
            await expectCode(code) { try await h.caller.call(IdentityAPI.updateProfile, request) }
        }
        let stored = try #require(try await h.store.user(id: UserID(id)))
        #expect(stored.version == 1)
        #expect(stored.displayName == nil)
        #expect(h.events.topics == ["user.created"])
    }

    @Test func getAndDeleteBadIDs() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        for id in ["", "' OR '1'='1", String(repeating: "i", count: 10_000), "a/b"] {
            await expectCode(.invalidArgument) { try await h.caller.call(IdentityAPI.getUser, UserIDRequest(userID: id)) }
            await expectCode(.invalidArgument) { try await h.caller.call(IdentityAPI.deleteUser, UserIDRequest(userID: id)) }
        }
    }

    /// Invalid UTF-8 inside the binary message: the body does not decode as the request, or
    /// decodes with U+FFFD in place, which the field checks refuse. Either way, nothing is written.
    @Test(arguments: ["email", "password", "displayName"])
    func invalidUTF8InsideTheMessage(_ field: String) async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let marker = "QQQQ"
        let request = SignUpRequest(
            email: field == "email" ? "a\(marker)@example.com" : "a@example.com",
            password: field == "password" ? "glacier\(marker)lantern" : Self.strong,
            displayName: field == "displayName" ? "name\(marker)" : "name")
        var body = try ProtobufEncoder().encode(request)
        let markerBytes = Array(marker.utf8)
        let at = try #require((0...(body.count - 4)).first { Array(body[$0..<$0 + 4]) == markerBytes })
        body.replaceSubrange(at..<at + 4, with: [0xFF, 0xFE, 0xC3, 0x28])
        let handler = try #require(h.handlers.router().handler(for: IdentityAPI.signUp.name))
        do {
            _ = try await handler(body, RPCContext(method: IdentityAPI.signUp.name))
            Issue.record("accepted invalid UTF-8 in \(field)")
        } catch let error as RPCError {
            let allowed: Set<ErrorCode> = [.malformedRequest, .invalidEmail, .weakPassword, .invalidArgument]
            #expect(allowed.contains(error.code), "\(error)")
        }
        #expect(try await h.store.count() == 0)
    }
}
