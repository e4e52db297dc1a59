import Foundation
@testable import SQLiteStores
import GatehouseSupport
import GRDB
import GatehouseContracts
import GatehouseTestSupport
import Testing
import TokenCore
@testable import TokenService
import RPCRouting
import TokenPorts

/// An acknowledged session and refresh rotation survive `kill -9` of the token service.
///
/// `token-crash-writer` issues sessions and refreshes each three times, printing
/// `<sessionID> <refreshToken>` after every acknowledged operation. We read at least 300 lines,
/// SIGKILL it, drain what it had already printed, and reopen the same file with a new
/// `TokenService` (the same stored refresh secret, hence the same successor derivation).
///
/// What exactly holds after the kill, per printed line and per session:
///
/// 1. Every printed refresh token is in the store and belongs to the printed session (acknowledged
///    writes are not lost). Checked by a read, so nothing is rotated by checking it.
/// 2. The child works sequentially and prints after each acknowledgement, so at the kill it may
///    have committed *at most one* operation it never printed. For an already printed session
///    that operation can only be one more rotation of its latest printed token `T`, committed
///    with `successor = HMAC(secret, T)`. So: at most one session's latest printed token is
///    already used, and where it is, the stored successor is exactly `hash(HMAC(secret, T))`.
/// 3. Refreshing `T` succeeds for every session and answers with `HMAC(secret, T)` as the new
///    refresh token, whichever case applies: if `T` is unused it rotates now; if the child had
///    rotated it further but not printed, it is a grace replay returning that same successor.
///    The reopened service uses a 1-hour grace window so a slow machine cannot turn the replay
///    into reuse detection (the default 10 s window is a policy matter, not durability).
/// 4. The successor then refreshes too (the session was not revoked as a reuse), so the chain
///    continues after the crash.
@Suite struct DurabilityTests {
    struct Line: Hashable {
        let sessionID: String
        let refreshToken: String
    }

    @Test func acknowledgedSessionsAndRotationsSurviveKill9() async throws {
        let dir = try TemporaryDirectory(prefix: "token-crash")
        defer { dir.remove() }

        let (raw, process) = try await runUntilLinesThenKill(try BuiltProducts.executable(named: "token-crash-writer"), [dir.path], count: 300)
        #expect(process.terminationReason == .uncaughtSignal)
        #expect(process.terminationStatus == SIGKILL)
        #expect(raw.count >= 300)
        let lines = raw.map { line -> Line in
            let parts = line.split(separator: " ")
            return Line(sessionID: parts.first.map(String.init) ?? "", refreshToken: parts.count > 1 ? String(parts[1]) : "")
        }
        #expect(lines.allSatisfy { !$0.sessionID.isEmpty && TokenService.isWellFormedRefreshToken($0.refreshToken) })

        // The latest acknowledged refresh token of each session, in order of first appearance.
        var latest: [String: String] = [:]
        var order: [String] = []
        for line in lines {
            if latest[line.sessionID] == nil { order.append(line.sessionID) }
            latest[line.sessionID] = line.refreshToken
        }
        #expect(order.count >= 300 / 4)

        // Reopen the same file, as a restarted token service would.
        var config = TokenConfiguration(issuer: "https://auth.test", audience: "app")
        config.refreshGrace = 3600
        let identity = FakeIdentityService()
        // The system clock: the child stamped its sessions with the real time.
        let service = try await TokenService.start(
            configuration: config, store: SQLiteTokenStore(path: dir.path("token.sqlite")), identity: identity.caller, clock: .system)
        let users = try await Set(order.asyncMap { try await service.store.session(id: $0)?.userID ?? "" })
        for user in users where !user.isEmpty { identity.set(user, UserClaims(email: "\(user)@example.com", emailVerified: true)) }

        // 1. Every acknowledged session exists and every acknowledged token maps to its session.
        var missingSessions: [String] = []
        for id in order where try await service.store.session(id: id) == nil { missingSessions.append(id) }
        #expect(missingSessions.isEmpty, "acknowledged sessions lost: \(missingSessions.prefix(5))")
        var lostTokens: [Line] = []
        for line in lines where try await service.store.session(forRefreshHash: TokenService.hash(line.refreshToken))?.id != line.sessionID {
            lostTokens.append(line)
        }
        #expect(lostTokens.isEmpty, "acknowledged refresh tokens lost: \(lostTokens.count)")

        // 2. At most one session was rotated past its latest printed token, and only to the
        //    derived successor.
        var rotatedFurther: [String] = []
        for id in order {
            let token = latest[id]!
            let hash = TokenService.hash(token)
            let current = try await service.store.currentHash(sessionID: id)
            guard current != hash else { continue }
            rotatedFurther.append(id)
            #expect(current == TokenService.hash(service.successor(of: token)), "session \(id) rotated to an unexpected successor")
        }
        #expect(rotatedFurther.count <= 1, "more than one unacknowledged rotation: \(rotatedFurther)")

        // 3 and 4. The latest acknowledged token refreshes (fresh rotation or grace replay), to
        //    the derived successor, and that successor refreshes again.
        var failures: [String] = []
        for id in order {
            let token = latest[id]!
            do {
                let next = try await service.refresh(RefreshRequest(refreshToken: token))
                guard next.sessionID == id, next.refreshToken == service.successor(of: token) else {
                    failures.append("\(id): answered \(next.sessionID) with another successor")
                    continue
                }
                let after = try await service.refresh(RefreshRequest(refreshToken: next.refreshToken))
                if after.sessionID != id { failures.append("\(id): successor answered for \(after.sessionID)") }
            } catch {
                failures.append("\(id): \(error)")
            }
        }
        #expect(failures.isEmpty, "\(failures.count) sessions failed: \(failures.prefix(5))")
    }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
