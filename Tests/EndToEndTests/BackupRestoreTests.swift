import Foundation
import GatehouseTestSupport
import GatehouseTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Runs the `gatehouse` binary to completion without blocking a cooperative thread.
func runGatehouse(_ arguments: [String], environment: [String: String]) async throws -> ProcessResult {
    try await runProcess(try gatehouseBinary(), arguments, environment: environment)
}

/// What the load acknowledged, with when the acknowledgement arrived.
final class Ledger: @unchecked Sendable {
    private let lock = NSLock()
    private var _users: [(email: String, sent: ContinuousClock.Instant, at: ContinuousClock.Instant)] = []
    private var _sessions: [(refresh: String, at: ContinuousClock.Instant)] = []
    private var _stopped = false
    private var _refreshes = 0

    func user(_ email: String, sent: ContinuousClock.Instant, at: ContinuousClock.Instant) { lock.withLock { _users.append((email, sent, at)) } }
    func session(_ refresh: String, at: ContinuousClock.Instant) { lock.withLock { _sessions.append((refresh, at)) } }
    func refreshed() { lock.withLock { _refreshes += 1 } }
    var refreshes: Int { lock.withLock { _refreshes } }
    func stop() { lock.withLock { _stopped = true } }
    var stopped: Bool { lock.withLock { _stopped } }
    var users: [(email: String, sent: ContinuousClock.Instant, at: ContinuousClock.Instant)] { lock.withLock { _users } }
    var sessions: [(refresh: String, at: ContinuousClock.Instant)] { lock.withLock { _sessions } }
}

let loadPassword = "correct horse battery staple"

/// One load worker: signs up users, signs earlier ones in again, and keeps rotating one "churn"
/// session of its own. Recorded sessions are never refreshed during the load, so the backed-up
/// refresh token of each is exactly the one recorded; the churn session is not recorded.
func backupLoadWorker(_ stack: Stack, worker: Int, ledger: Ledger) async {
    var churn: String?
    var mine: [String] = []
    var n = 0
    while !ledger.stopped {
        n += 1
        let email = "w\(worker)-\(n)-\(UUID().uuidString.prefix(6))@example.com"
        let sent = ContinuousClock.now
        if let r = try? await stack.request("POST", "/v1/accounts", json: ["email": email, "password": loadPassword]), r.status == 201,
           let refresh = (r.json["session"] as? [String: Any])?["refreshToken"] as? String {
            let at = ContinuousClock.now
            ledger.user(email, sent: sent, at: at)
            mine.append(email)
            if churn == nil { churn = refresh } else { ledger.session(refresh, at: at) }
        }
        if n.isMultiple(of: 3), let earlier = mine.randomElement(),
           let r = try? await stack.request("POST", "/v1/sessions", json: ["email": earlier, "password": loadPassword]), r.status == 200,
           let refresh = (r.json["session"] as? [String: Any])?["refreshToken"] as? String {
            ledger.session(refresh, at: ContinuousClock.now)
        }
        if let token = churn,
           let r = try? await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": token]), r.status == 200,
           let next = (r.json["session"] as? [String: Any])?["refreshToken"] as? String {
            churn = next
            ledger.refreshed()
        }
    }
}

@Suite("Backup under load and restore (processes, HTTP)", .serialized)
struct BackupRestoreTests {
    @Test("gatehouse serve: backup under sign-ups, sign-ins and refreshes; restore; every earlier user and session is there")
    func serve() async throws {
        try await backupUnderLoad(roles: ["serve"])
    }

    @Test("identity, token and gateway processes: the same, the backup reading both services' files")
    func threeProcesses() async throws {
        try await backupUnderLoad(roles: ["identity", "token", "gateway"])
    }

    func backupUnderLoad(roles: [String]) async throws {
        let backupDir = FileManager.default.temporaryDirectory.appendingPathComponent("gh-e2e-backup-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: backupDir) }
        let stack = Stack()
        defer { stack.stopAll() }
        for role in roles { try stack.start(role) }
        try await stack.waitReady()

        let ledger = Ledger()
        let workers = (0..<4).map { worker in Task { await backupLoadWorker(stack, worker: worker, ledger: ledger) } }
        // Let the load build up some state, then back up while it keeps going.
        try await waitUntil("40 users and 40 sessions acknowledged", timeout: .seconds(60), interval: .milliseconds(50)) {
            ledger.sessions.count >= 40 && ledger.users.count >= 40
        }
        let backupStart = ContinuousClock.now
        let backup = try await runGatehouse(["backup", "--out", backupDir.path], environment: stack.environment)
        let backupEnd = ContinuousClock.now
        // Keep loading a little after the backup, so the live data moves on past it.
        try await waitUntil("10 users signed up after the backup", timeout: .seconds(60), interval: .milliseconds(50)) {
            ledger.users.filter { $0.sent > backupEnd }.count >= 10
        }
        ledger.stop()
        for worker in workers { await worker.value }

        #expect(backup.status == 0, "backup failed: \(backup.stderr)")
        let lines = backup.stdout.split(separator: "\n")
        #expect(lines.count == 2 && lines[0].contains("identity.sqlite") && lines[1].contains("token.sqlite"), "\(backup.stdout)")
        for name in ["identity.sqlite", "token.sqlite"] {
            let attributes = try FileManager.default.attributesOfItem(atPath: backupDir.appendingPathComponent(name).path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        }
        // The same folder again is refused.
        let again = try await runGatehouse(["backup", "--out", backupDir.path], environment: stack.environment)
        #expect(again.status != 0 && again.stderr.contains("already exists"))
        // Restoring onto the running stack's data folder is refused.
        let busy = try await runGatehouse(["restore", "--from", backupDir.path], environment: stack.environment)
        #expect(busy.status != 0 && busy.stderr.contains("running process"), "\(busy.stderr)")

        let users = ledger.users.filter { $0.at < backupStart }
        let sessions = ledger.sessions.filter { $0.at < backupStart }
        #expect(users.count >= 40 && sessions.count >= 40)
        // Sign-ups in flight while the backup ran (sent before it ended, acknowledged after it
        // began): the copy was taken under writes. Not "acknowledged during it", which a loaded
        // machine can miss when the backup is quick and the sign-ups slow.
        let during = ledger.users.filter { $0.sent < backupEnd && $0.at > backupStart }.count
        #expect(during > 0, "no sign-up was in flight while the backup ran")
        // Sent after the backup ended (one sent before could have been committed before its copy).
        let later = ledger.users.filter { $0.sent > backupEnd }.prefix(10)
        #expect(!later.isEmpty)
        #expect(ledger.refreshes > 0)
        print("backup took \(backupEnd - backupStart); \(users.count) users and \(sessions.count) sessions before it, \(during) users while it ran; \(ledger.refreshes) refreshes")
        for role in roles.reversed() { await stack.kill(role, signal: SIGTERM) }

        // Restore into a fresh data folder (the documented procedure, via `gatehouse restore`) and start on it.
        let restored = Stack()
        defer { restored.stopAll() }
        let restore = try await runGatehouse(["restore", "--from", backupDir.path, "--data-dir", restored.dataDir.path], environment: restored.environment)
        #expect(restore.status == 0, "restore failed: \(restore.stderr)")
        // The key-encryption key is not in a backup (it is kept apart); the operator points the
        // restored token service at their copy of it.
        let kek = ["GATEHOUSE_KEY_ENCRYPTION_KEY_FILE": stack.dataDir.appendingPathComponent("key-encryption.key").path]
        for role in roles { try restored.start(role, environment: kek) }
        try await restored.waitReady()
        var missingUsers: [String] = []
        for user in users {
            let r = try await restored.request("POST", "/v1/sessions", json: ["email": user.email, "password": loadPassword])
            if r.status != 200 { missingUsers.append("\(user.email): \(r.status)") }
        }
        // Users that signed up after the backup finished are not in it: the copy is a snapshot.
        for user in later {
            #expect(try await restored.request("POST", "/v1/sessions", json: ["email": user.email, "password": loadPassword]).status == 401)
        }
        #expect(missingUsers.isEmpty, "users acknowledged before the backup cannot sign in after restore: \(missingUsers.prefix(5))")
        var missingSessions = 0
        for session in sessions {
            let r = try await restored.request("POST", "/v1/sessions/refresh", json: ["refreshToken": session.refresh])
            if r.status != 200 { missingSessions += 1 }
        }
        #expect(missingSessions == 0, "\(missingSessions) of \(sessions.count) sessions acknowledged before the backup cannot refresh after restore")
    }
}
