import Foundation
import NIOCore
import NIOPosix
import Testing
@testable import LoadGenerator

@Suite("Only loopback without --allow-remote")
struct TargetGuardTests {
    @Test(arguments: ["http://10.1.2.3", "http://example.com", "http://10.1.2.3:8080/", "http://8.8.8.8", "http://[2001:db8::1]:80"])
    func remoteTargetsAreRefusedBeforeAnyTraffic(url: String) async throws {
        // The guard throws before an HTTP client exists, so nothing is sent (not even a connect).
        do {
            _ = try await LoadRunner(LoadConfiguration(url: url, scenario: .rawGet, maxRequests: 1, timeout: 1)).run()
            Issue.record("a run against \(url) was not refused")
        } catch let error as LoadError {
            guard case .remoteTargetRefused = error else {
                Issue.record("unexpected error \(error)")
                return
            }
            #expect(error.description.contains("--allow-remote"))
        }
    }

    @Test(arguments: ["http://127.0.0.1:8080", "http://127.8.9.10", "http://localhost:8080", "http://[::1]:8080/"])
    func loopbackTargetsAreAccepted(url: String) throws {
        let target = try TargetGuard.check(url: url, allowRemote: false)
        #expect(!target.addresses.isEmpty)
        #expect(!target.baseURL.hasSuffix("/"))
    }

    @Test func allowRemoteSkipsTheCheck() throws {
        let target = try TargetGuard.check(url: "http://10.1.2.3:8080", allowRemote: true)
        #expect(target.host == "10.1.2.3")
    }

    @Test func badURLs() {
        #expect(throws: LoadError.self) { try TargetGuard.check(url: "ftp://127.0.0.1", allowRemote: false) }
        #expect(throws: LoadError.self) { try TargetGuard.check(url: "127.0.0.1:8080", allowRemote: false) }
        #expect(throws: LoadError.self) { try TargetGuard.check(url: "http://", allowRemote: false) }
    }

    @Test func loopbackBytes() {
        #expect(TargetGuard.isLoopback([127, 0, 0, 1]))
        #expect(TargetGuard.isLoopback([127, 255, 1, 2]))
        #expect(!TargetGuard.isLoopback([10, 1, 2, 3]))
        #expect(!TargetGuard.isLoopback([128, 0, 0, 1]))
        #expect(TargetGuard.isLoopback(Array(repeating: 0, count: 15) + [1]))
        #expect(TargetGuard.isLoopback(Array(repeating: 0, count: 10) + [0xFF, 0xFF, 127, 0, 0, 1]))
        #expect(!TargetGuard.isLoopback(Array(repeating: 0, count: 10) + [0xFF, 0xFF, 10, 0, 0, 1]))
        #expect(!TargetGuard.isLoopback(Array(repeating: 0, count: 16)))
    }
}
