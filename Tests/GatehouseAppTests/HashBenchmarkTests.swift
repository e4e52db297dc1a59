import Foundation
import IdentityService
import Testing

@testable import GatehouseApp

@Suite struct HashBenchmarkTests {
    @Test func measuresOneThreadAndEveryWorker() throws {
        let parameters = Argon2Parameters(memoryKiB: 64, iterations: 1, parallelism: 1)
        let result = try HashBenchmark(parameters: parameters, threads: 2, seconds: 0.1).run()
        #expect(result.threads == 2)
        #expect(result.singleThreadMs > 0)
        #expect(result.parallelPerSecond > 0)
        #expect(result.text.contains("2 threads at once"))
        let json = try #require(try JSONSerialization.jsonObject(with: Data(result.json.utf8)) as? [String: Any])
        #expect(json["memoryKiB"] as? Int == 64)
        #expect(json["threads"] as? Int == 2)
    }
}
