import Foundation
import GatehouseContracts
import GatehouseTestSupport
import IdentityCore
import IdentityService
import RPCRouting
import Testing

/// Per-account throttling of failed sign-ins, on the test clock.
@Suite struct AttemptThrottleTests {
    let strong = "glacier lantern marmalade"
    /// 3 failures, then 1 s doubling up to 8 s; failures forgotten after 60 s.
    static let settings = PasswordAttemptThrottle.Settings(threshold: 3, window: 60, baseDelay: 1, maxDelay: 8, capacity: 1000)

    /// Signs in; the wire code and, for `too_many_attempts`, the retry-after seconds.
    func attempt(_ h: Harness, _ email: String, _ password: String) async -> (code: String, retryAfter: String?) {
        do {
            _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: email, password: password))
            return ("ok", nil)
        } catch let error as RPCError {
            return (error.code.rawValue, error.details[RPCError.retryAfterKey])
        } catch {
            return ("\(error)", nil)
        }
    }

    /// Signs in from client address `ip`; the wire code.
    func attempt(_ h: Harness, _ email: String, _ password: String, from ip: String) async -> String {
        do {
            _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: email, password: password, client: ClientInfo(ip: ip)))
            return "ok"
        } catch let error as RPCError {
            return error.code.rawValue
        } catch {
            return "\(error)"
        }
    }

    @Test("guesses from one address make that address wait, not the owner at another; guesses from many addresses make the account wait")
    func theOwnerElsewhereIsNotLockedOut() async throws {
        let h = try await Harness(throttle: Self.settings)
        defer { h.cleanup() }
        _ = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "ada@example.com", password: strong))
        var attacker: [String] = []
        for _ in 0..<6 { attacker.append(await attempt(h, "ada@example.com", "wrong password", from: "203.0.113.7")) }
        #expect(attacker == ["invalid_credentials", "invalid_credentials", "invalid_credentials"] + Array(repeating: "too_many_attempts", count: 3))
        // The owner, at home, signs in at once; that clears only the owner's own address and the account tier.
        #expect(await attempt(h, "ada@example.com", strong, from: "198.51.100.1") == "ok")
        #expect(await attempt(h, "ada@example.com", "wrong password", from: "203.0.113.7") == "too_many_attempts")
        // Spread over many addresses (two guesses each, under the per-address threshold), the
        // account-wide tier (ten times the threshold: 30) makes everyone wait, the owner too.
        var spread: [String] = []
        for i in 0..<16 { for _ in 0..<2 { spread.append(await attempt(h, "ada@example.com", "wrong password", from: "192.0.2.\(i)")) } }
        #expect(spread.prefix(30).allSatisfy { $0 == "invalid_credentials" })
        #expect(spread.suffix(2) == ["too_many_attempts", "too_many_attempts"])
        #expect(await attempt(h, "ada@example.com", strong, from: "198.51.100.1") == "too_many_attempts")
        h.clock.advance(by: 9)
        #expect(await attempt(h, "ada@example.com", strong, from: "198.51.100.1") == "ok")
    }

    /// The answers of a fixed script of wrong passwords and clock moves, for one email.
    func script(_ h: Harness, _ email: String) async -> [String] {
        var answers: [String] = []
        func record(_ a: (code: String, retryAfter: String?)) { answers.append(a.retryAfter.map { "\(a.code) \($0)" } ?? a.code) }
        for _ in 0..<4 { record(await attempt(h, email, "wrong password 1")) }
        // Waits grow 1, 2, 4, 8, then stay at 8 (the cap); a refused attempt changes nothing.
        for wait in [1.0, 2, 4, 8, 8] {
            h.clock.advance(by: wait - 0.5)
            record(await attempt(h, email, "wrong password 2"))
            h.clock.advance(by: 0.5)
            record(await attempt(h, email, "wrong password 3"))
        }
        return answers
    }

    static let expected = [
        "invalid_credentials", "invalid_credentials", "invalid_credentials", "too_many_attempts 1",
        "too_many_attempts 1", "invalid_credentials",
        "too_many_attempts 1", "invalid_credentials",
        "too_many_attempts 1", "invalid_credentials",
        "too_many_attempts 1", "invalid_credentials",
        "too_many_attempts 1", "invalid_credentials",
    ]

    @Test func failuresPastTheThresholdWaitLongerUpToTheCap() async throws {
        let h = try await Harness(throttle: Self.settings)
        defer { h.cleanup() }
        _ = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "eve@example.com", password: strong))
        #expect(await script(h, "eve@example.com") == Self.expected)
        // Past the cap the wait stays 8 s: a refusal just before says so.
        h.clock.advance(by: 1)
        #expect(await attempt(h, "eve@example.com", strong) == ("too_many_attempts", "7"))
    }

    @Test func anEmailWithoutAnAccountGetsTheSameAnswersAndIsRefusedBeforeAnyHash() async throws {
        let h = try await Harness(throttle: Self.settings)
        defer { h.cleanup() }
        _ = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "real@example.com", password: strong))
        // A refused attempt hashes nothing, for either.
        func refusedWithoutHashing(_ email: String, _ password: String) async {
            let before = h.pool.completedJobs
            #expect(await attempt(h, email, password).code == "too_many_attempts")
            #expect(h.pool.completedJobs == before)
        }
        let real = await script(h, "real@example.com")
        await refusedWithoutHashing("real@example.com", strong)
        let missing = await script(h, "missing@example.com")
        await refusedWithoutHashing("missing@example.com", "anything")
        #expect(real == missing)
        #expect(missing == Self.expected)
    }

    @Test func aCorrectPasswordResetsTheCountAndOtherAccountsAreUnaffected() async throws {
        let h = try await Harness(throttle: Self.settings)
        defer { h.cleanup() }
        _ = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "amy@example.com", password: strong))
        _ = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "bob@example.com", password: strong))
        for _ in 0..<2 { #expect(await attempt(h, "amy@example.com", "wrong").code == "invalid_credentials") }
        #expect(await attempt(h, "amy@example.com", strong).code == "ok")
        // Three more failures are allowed again before the wait.
        for _ in 0..<3 { #expect(await attempt(h, "amy@example.com", "wrong").code == "invalid_credentials") }
        #expect(await attempt(h, "amy@example.com", strong).code == "too_many_attempts")
        // The email is normalized: the same account whatever its case.
        #expect(await attempt(h, "AMY@Example.com", strong).code == "too_many_attempts")
        #expect(await attempt(h, "bob@example.com", strong).code == "ok")
        // After the wait, the owner gets in.
        h.clock.advance(by: 1)
        #expect(await attempt(h, "amy@example.com", strong).code == "ok")
    }

    @Test func failuresAreForgottenAfterTheWindow() async throws {
        let h = try await Harness(throttle: Self.settings)
        defer { h.cleanup() }
        for _ in 0..<2 { #expect(await attempt(h, "carl@example.com", "wrong").code == "invalid_credentials") }
        h.clock.advance(by: 60)
        for _ in 0..<3 { #expect(await attempt(h, "carl@example.com", "wrong").code == "invalid_credentials") }
        #expect(await attempt(h, "carl@example.com", "wrong").code == "too_many_attempts")
    }

    @Test func concurrentAttemptsCountBeforeTheyFinish() throws {
        let clock = ManualClock()
        let throttle = PasswordAttemptThrottle(settings: Self.settings, clock: clock.wallClock)
        let key = throttle.key(normalizedEmail: "dan@example.com")
        // Ten guesses in flight at once: only the first three get to a hash.
        var admitted = 0
        for _ in 0..<10 {
            if (try? throttle.begin(key)) != nil { admitted += 1 }
        }
        #expect(admitted == 3)
    }

    @Test func anAttemptThatCouldNotCheckIsGivenBack() async throws {
        let clock = ManualClock()
        let throttle = PasswordAttemptThrottle(settings: Self.settings, clock: clock.wallClock)
        let key = throttle.key(normalizedEmail: "fay@example.com")
        for _ in 0..<5 {
            await #expect(throws: IdentityError.overloaded) {
                try await throttle.guarding(key) { () async throws -> Void in throw IdentityError.overloaded }
            }
        }
        #expect(throttle.count == 0)
        for _ in 0..<3 {
            await #expect(throws: IdentityError.invalidCredentials) {
                try await throttle.guarding(key) { () async throws -> Void in throw IdentityError.invalidCredentials }
            }
        }
        #expect(throws: IdentityError.tooManyAttempts(retryAfterSeconds: 1)) { try throttle.begin(key) }
    }

    @Test func keysAreHashedEmails() {
        let throttle = PasswordAttemptThrottle()
        #expect(throttle.key(normalizedEmail: "a@example.com") == throttle.key(normalizedEmail: "a@example.com"))
        #expect(throttle.key(normalizedEmail: "a@example.com") != throttle.key(normalizedEmail: "b@example.com"))
        // Salted per process: another throttle hashes the same email differently.
        #expect(PasswordAttemptThrottle().key(normalizedEmail: "a@example.com") != throttle.key(normalizedEmail: "a@example.com"))
    }

    @Test func theTableIsBoundedAndSprayingEmailsDoesNotFreeAThrottledAccount() throws {
        let clock = ManualClock()
        var settings = Self.settings
        settings.capacity = 64
        let throttle = PasswordAttemptThrottle(settings: settings, clock: clock.wallClock)
        let target = throttle.key(normalizedEmail: "target@example.com")
        for _ in 0..<3 { try throttle.begin(target) }
        #expect(throws: IdentityError.self) { try throttle.begin(target) }
        for i in 0..<1000 {
            clock.advance(by: 0.0001)
            try throttle.begin(throttle.key(normalizedEmail: "spray\(i)@example.com"))
            #expect(throttle.count <= 64)
        }
        #expect(throws: IdentityError.self) { try throttle.begin(target) }
    }

    @Test func thresholdZeroTurnsItOff() async throws {
        var settings = Self.settings
        settings.threshold = 0
        let h = try await Harness(throttle: settings)
        defer { h.cleanup() }
        for _ in 0..<10 { #expect(await attempt(h, "gus@example.com", "wrong").code == "invalid_credentials") }
    }
}
