import Foundation
import GatehouseTestSupport
import Testing

/// `Examples/ClientWalkthrough` (issue 23 §2): the example program walks seed 000's and seed
/// 002's flows with the client library against three real processes, and says what it saw.
@Suite("The client library's example program")
struct ClientExampleTests {
    @Test("gatehouse-client-example walks seed 000 (sign up, sign out, sign in, the user, sign out) and seed 002 (anonymous, then sign in with a migration) and exits 0")
    func walkthrough() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let example = try BuiltProducts.executable(named: "gatehouse-client-example")
        let run = try await runProcess(example, [stack.baseURL])
        #expect(run.status == 0, "stdout: \(run.stdout)\nstderr: \(run.stderr)")
        let lines = run.stdout.split(separator: "\n").map(String.init)
        let expected = [
            "seed 000: signed up walkthrough-", "seed 000: signed out, state signed out", "seed 000: signed in, ようこそ、walkthrough-",
            "seed 000: user ", "seed 000: wrong password says \"The email or password is incorrect.\"", "seed 000: signed out, state signed out",
            "seed 002: anonymous user ", "seed 002: migration required from ", "seed 002: resumed as ", "seed 002: signed out, state signed out",
        ]
        #expect(lines.count == expected.count, "\(lines)")
        for (line, prefix) in zip(lines, expected) { #expect(line.hasPrefix(prefix), "\(line) does not start with \(prefix)") }
        // The user the anonymous app resumed as is the one seed 000 made; the anonymous one is gone.
        let made = try #require(lines.first?.components(separatedBy: " as ").last)
        #expect(lines.contains { $0.hasPrefix("seed 002: resumed as \(made),") })
        #expect(lines.contains { $0.contains("providers password") })
        #expect(lines.contains { $0.hasPrefix("seed 002: anonymous user ") && $0.hasSuffix("state anonymous") })

        // Without a server it says so and fails.
        let down = try await runProcess(example, ["http://127.0.0.1:\(freeLoopbackPort())"])
        #expect(down.status == 1)
        #expect(down.stdout.contains("Cannot reach the server"), "\(down.stdout)")
    }
}
