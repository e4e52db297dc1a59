import Foundation
import GatehouseContracts
import GatehouseTestSupport
import Testing

@testable import GatehouseApp

/// `gatehouse users import` reads the next batch while one call is in flight (issue 22 part 2),
/// yet sends a batch only once the one before it was answered (batches commit in file order),
/// and counts and refused lines come out as a one-batch-at-a-time import gave them.
@Suite struct ImportPipelineTests {
    /// A fake `identity.importUsers` and the file reader's progress: refuses users whose email
    /// starts with `refuse`, records the batches, how many calls overlapped and how many records
    /// were read while a call was in flight. A call waits (boundedly) until a batch more has been
    /// read or the file ended, so a client that reads only between calls shows as no read-ahead.
    final class Service: @unchecked Sendable {
        let lock = NSLock()
        let batchSize: Int
        let failOnBatch: Int?
        var batches: [[String]] = []
        var inFlight = 0
        var maxInFlight = 0
        var read = 0
        var readDuringCalls = 0
        var ended = false

        init(batchSize: Int, failOnBatch: Int? = nil) {
            self.batchSize = batchSize
            self.failOnBatch = failOnBatch
        }

        func locked<T>(_ body: () -> T) -> T {
            lock.lock()
            defer { lock.unlock() }
            return body()
        }

        /// The file's next record, counted; a millisecond per record, as a real batch of 1,000
        /// takes milliseconds to read (5 records read faster than a new task starts).
        func next(_ file: UserImportFile) throws -> ImportFileItem? {
            usleep(1000)
            let item = try file.next()
            locked {
                read += 1
                if inFlight > 0 { readDuringCalls += 1 }
                if item == nil { ended = true }
            }
            return item
        }

        func call(_ users: [ImportedUser]) async throws -> ImportUsersResponse {
            let (number, readAtStart) = locked {
                batches.append(users.map { $0.email ?? "" })
                inFlight += 1
                maxInFlight = max(maxInFlight, inFlight)
                return (batches.count, read)
            }
            for _ in 0..<200 where !locked({ ended || read - readAtStart >= batchSize }) {
                try await Task.sleep(for: .milliseconds(5))
            }
            locked { inFlight -= 1 }
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

    @Test func theNextBatchIsReadDuringACallAndTheOutputIsInFileOrder() async throws {
        let dir = try TemporaryDirectory(prefix: "import-pipeline")
        defer { dir.remove() }
        let path = try writeFile(dir, count: 60)
        let service = Service(batchSize: 5)
        let file = try UserImportFile(path: path, format: .jsonl)
        var out: [String] = []
        let summary = try await AdminClient.importBatches(from: { try service.next(file) }, batchSize: 5, failure: { out.append($0) }) {
            try await service.call($0)
        }
        let expected = try sequentialOutput(path, batchSize: 5)
        #expect(out == expected.lines)
        #expect(summary == expected.summary)
        #expect(summary.created + summary.failed == 69 && summary.failed == 8 + 5 + 8)
        // One call at a time, and the records of the next batch were read during it.
        #expect(service.locked { service.maxInFlight } == 1)
        #expect(service.locked { service.readDuringCalls } > 0)
        let batches = service.locked { service.batches }
        #expect(batches.flatMap { $0 }.count == 60 - 5 + 1)
        #expect(batches.dropLast().allSatisfy { $0.count == 5 })
        var emails: [String] = []
        for n in 1...60 where n % 11 != 0 { emails.append((n % 7 == 0 ? "refuse" : "user") + "\(n)@example.com") }
        emails.append("last@example.com")
        #expect(batches.flatMap { $0 } == emails)
    }

    @Test func aFailedCallStopsTheImport() async throws {
        let dir = try TemporaryDirectory(prefix: "import-pipeline")
        defer { dir.remove() }
        let path = try writeFile(dir, count: 60)
        let service = Service(batchSize: 5, failOnBatch: 3)
        let file = try UserImportFile(path: path, format: .jsonl)
        var out: [String] = []
        await #expect(throws: CancellationError.self) {
            _ = try await AdminClient.importBatches(from: { try service.next(file) }, batchSize: 5, failure: { out.append($0) }) {
                try await service.call($0)
            }
        }
        // Batch 2's refusal (line 7) and line 11 (read before batch 3 was sent) were said, as a
        // one-at-a-time import said them; nothing after batch 3 was sent.
        #expect(out == ["line 7: refused (invalid_argument)", "line 11: not JSON"])
        #expect(service.locked { service.batches.count } == 3)
        #expect(service.locked { service.inFlight } == 0)
    }
}
