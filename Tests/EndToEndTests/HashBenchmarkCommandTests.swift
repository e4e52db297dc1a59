import Foundation
import Testing

/// `gatehouse hash-benchmark`: figures with the configured parameters, refusals with a message.
@Suite struct HashBenchmarkCommandTests {
    @Test func printsBothRatesAsJSON() async throws {
        let (status, stdout, stderr) = try await runGatehouse(
            ["hash-benchmark", "--seconds", "0.1", "--json", "--argon2-memory-kib", "64", "--argon2-iterations", "1", "--hash-workers", "2"],
            environment: [:])
        #expect(status == 0, "\(stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(stdout.utf8)) as? [String: Any])
        #expect(json["memoryKiB"] as? Int == 64)
        #expect(json["threads"] as? Int == 2)
        #expect((json["parallelPerSecond"] as? Double ?? 0) > 0)
    }

    @Test(arguments: [["--seconds", "0"], ["--seconds", "601"], ["--argon2-memory-kib", "4"], ["--hash-workers", "0"]])
    func badValuesAreRefused(arguments: [String]) async throws {
        let (status, _, stderr) = try await runGatehouse(["hash-benchmark"] + arguments, environment: [:])
        #expect(status != 0)
        #expect(stderr.contains("seconds") || stderr.contains("GATEHOUSE_"), "\(stderr)")
    }
}
