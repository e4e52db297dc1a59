// Test helper for the token kill -9 durability test: opens a `TokenService` on the data directory
// given as the first argument (file `token.sqlite`), with an in-process fake identity answering
// `identity.claimsForSession`, then loops: issue a session, refresh it three times. After each
// operation returned (was acknowledged) it prints and flushes one line:
//
//     <sessionID> <refreshToken>
//
// where the refresh token is the latest one of that session. It stops by itself after 60 s in
// case nobody kills it.
import Foundation
import GatehouseContracts
import TokenCore
import SQLiteStores
import TokenService
import RPCRouting

func fakeIdentity() -> RPCRouter {
    var router = RPCRouter()
    router.register(ServiceContracts.claimsForSession) { request, _ in
        UserClaims(email: "\(request.userID)@example.com", emailVerified: true)
    }
    return router
}

func runCrashWriter() async -> Int32 {
    let arguments = CommandLine.arguments
    guard arguments.count >= 2 else {
        FileHandle.standardError.write(Data("usage: token-crash-writer DATA_DIR\n".utf8))
        return 2
    }
    do {
        try FileManager.default.createDirectory(atPath: arguments[1], withIntermediateDirectories: true)
        let config = TokenConfiguration(issuer: "https://auth.test", audience: "app")
        let store = try SQLiteTokenStore(path: URL(fileURLWithPath: arguments[1]).appendingPathComponent("token.sqlite").path)
        let service = try await TokenService.start(configuration: config, store: store, identity: LocalCaller(router: fakeIdentity()))
        let started = Date()
        var index = 0
        while Date().timeIntervalSince(started) < 60 {
            index += 1
            let user = "user-\(index)"
            var tokens = try await service.issueSession(IssueSessionRequest(
                userID: user, claims: UserClaims(email: "\(user)@example.com", emailVerified: true), amr: ["pwd"],
                authTime: Date(), client: ClientInfo(userAgent: "crash-writer", ip: "127.0.0.1")))
            print(tokens.sessionID, tokens.refreshToken)
            fflush(nil)
            for _ in 0..<3 {
                tokens = try await service.refresh(RefreshRequest(refreshToken: tokens.refreshToken))
                print(tokens.sessionID, tokens.refreshToken)
                fflush(nil)
            }
        }
        return 0
    } catch {
        FileHandle.standardError.write(Data("token-crash-writer: \(error)\n".utf8))
        return 1
    }
}

exit(await runCrashWriter())
