import Foundation
import GatehouseTestSupport
import Testing

/// `gatehouse hash-benchmark`: figures with the configured parameters, refusals with a message.
@Suite struct HashBenchmarkCommandTests {
    @Test func printsBothRatesAsJSON() async throws {
        let result = try await runGatehouse(
            ["hash-benchmark", "--seconds", "0.1", "--json", "--argon2-memory-kib", "64", "--argon2-iterations", "1", "--hash-workers", "2"],
            environment: [:])
        #expect(result.status == 0, "\(result.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(json["memoryKiB"] as? Int == 64)
        #expect(json["threads"] as? Int == 2)
        #expect((json["parallelPerSecond"] as? Double ?? 0) > 0)
    }

    @Test(arguments: [["--seconds", "0"], ["--seconds", "601"], ["--argon2-memory-kib", "4"], ["--hash-workers", "0"]])
    func badValuesAreRefused(arguments: [String]) async throws {
        let result = try await runGatehouse(["hash-benchmark"] + arguments, environment: [:])
        #expect(result.status != 0)
        #expect(result.stderr.contains("seconds") || result.stderr.contains("GATEHOUSE_"), "\(result.stderr)")
    }
}
