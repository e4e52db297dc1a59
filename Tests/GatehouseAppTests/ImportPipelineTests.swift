import Foundation
import GatehouseContracts
import GatehouseTestSupport
import Testing

@testable import GatehouseApp

/// `gatehouse users import` keeps two batches in flight (issue 22 part 2): the next batch is sent
/// before the reply to the one before, yet counts and refused lines come out as a
/// one-batch-at-a-time import gave them, and a failed call stops the import.
@Suite struct ImportPipelineTests {
    /// A fake `identity.importUsers`: refuses users whose email starts with `refuse`, records the
    /// batches and how many calls overlapped. A call waits (boundedly) for the next one to start,
    /// so a client that sends one batch at a time shows as `maxInFlight == 1`.
    actor Service {
        var batches: [[String]] = []
        var inFlight = 0
        var maxInFlight = 0
        var failOnBatch: Int?

        init(failOnBatch: Int? = nil) { self.failOnBatch = failOnBatch }

        func call(_ users: [ImportedUser]) async throws -> ImportUsersResponse {
            batches.append(users.map { $0.email ?? "" })
            let number = batches.count
            inFlight += 1
            maxInFlight = max(maxInFlight, inFlight)
            defer { inFlight -= 1 }
            for _ in 0..<200 where batches.count == number && !(users.last?.email?.hasPrefix("last") ?? false) {
                try await Task.sleep(for: .milliseconds(5))
            }
            if number == failOnBatch { throw CancellationError() }
            return ImportUsersResponse(
                results: users.enumerated().map { index, user in
                    (user.email ?? "").hasPrefix("refuse")
                        ? ImportResult(index: Int32(index), outcome: "failed", errorCode: "invalid_argument", errorMessage: "refused")
                        : ImportResult(index: Int32(index), outcome: "created", userID: "id\(index)")
                })
        }
    }

    /// A file of `count` lines: every 7th refused by the service, every 11th not JSON, then a run
    /// of unreadable lines longer than a batch, then the last user.
    func writeFile(_ dir: TemporaryDirectory, count: Int) throws -> String {
        var lines: [String] = []
        for n in 1...count {
            if n % 11 == 0 {
                lines.append("{not json \(n)")
            } else {
                lines.append(#"{"email":"\#(n % 7 == 0 ? "refuse" : "user")\#(n)@example.com"}"#)
            }
        }
        lines += Array(repeating: "nope", count: 8)
        lines.append(#"{"email":"last@example.com"}"#)
        let path = dir.path("users.jsonl")
        try Data(lines.joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// What a one-batch-at-a-time import printed: a line's reading failure at once, a batch's
    /// refusals once it was sent.
    func sequentialOutput(_ path: String, batchSize: Int) throws -> (lines: [String], summary: ImportSummary) {
        let file = try UserImportFile(path: path, format: .jsonl)
        var out: [String] = []
        var summary = ImportSummary()
        var batch: [(line: Int, email: String)] = []
        func send() {
            for (line, email) in batch {
                if email.hasPrefix("refuse") {
                    summary.failed += 1
                    out.append("line \(line): refused (invalid_argument)")
                } else {
                    summary.created += 1
                }
            }
            batch = []
        }
        while let item = try file.next() {
            switch item.user {
            case .success(let user):
                batch.append((item.line, user.email ?? ""))
                if batch.count >= batchSize { send() }
            case .failure(let error):
                summary.failed += 1
                out.append("line \(item.line): \(error)")
            }
        }
        send()
        return (out, summary)
    }

    @Test func twoBatchesAreInFlightAndTheOutputIsInFileOrder() async throws {
        let dir = try TemporaryDirectory(prefix: "import-pipeline")
        defer { dir.remove() }
        let path = try writeFile(dir, count: 60)
        let service = Service()
        var out: [String] = []
        let summary = try await AdminClient.importBatches(from: try UserImportFile(path: path, format: .jsonl), batchSize: 5, failure: { out.append($0) }) {
            try await service.call($0)
        }
        let expected = try sequentialOutput(path, batchSize: 5)
        #expect(out == expected.lines)
        #expect(summary == expected.summary)
        #expect(summary.created + summary.failed == 69 && summary.failed == 8 + 5 + 8)
        #expect(await service.maxInFlight == 2)
        let batches = await service.batches
        #expect(batches.flatMap { $0 }.count == 60 - 5 + 1)
        #expect(batches.dropLast().allSatisfy { $0.count == 5 })
    }

    @Test func aFailedCallStopsTheImportAfterTheCallInFlight() async throws {
        let dir = try TemporaryDirectory(prefix: "import-pipeline")
        defer { dir.remove() }
        let path = try writeFile(dir, count: 60)
        let service = Service(failOnBatch: 3)
        var out: [String] = []
        await #expect(throws: CancellationError.self) {
            _ = try await AdminClient.importBatches(from: try UserImportFile(path: path, format: .jsonl), batchSize: 5, failure: { out.append($0) }) {
                try await service.call($0)
            }
        }
        // Batch 2's refusal (line 7) and line 11 (read before batch 3) were said, as a
        // one-at-a-time import said them; batch 4 was in flight and ended; nothing after it was sent.
        #expect(out == ["line 7: refused (invalid_argument)", "line 11: not JSON"])
        #expect(await service.batches.count == 4)
        #expect(await service.inFlight == 0)
    }
}
