import Foundation
import GatehouseContracts

/// The counts of one `gatehouse users import` run.
public struct ImportSummary: Sendable, Hashable {
    /// New users.
    public var created = 0
    /// Existing users overwritten (`--mode update`).
    public var updated = 0
    /// Existing users left as they were (`--mode skip`).
    public var skipped = 0
    /// Lines refused (by the file's reader or the identity service).
    public var failed = 0

    /// Empty counts.
    public init() {}

    /// `created 2, updated 0, skipped 1, failed 0`.
    public var line: String { "created \(created), updated \(updated), skipped \(skipped), failed \(failed)" }
}

// `gatehouse users import|export` (issue 22 §5): the file streamed in batches of
// `IdentityAPI.maxImportBatch` through `identity.importUsers`, the users paged out of
// `identity.exportUsers`.
extension AdminClient {
    /// Each batch's deadline: at least a minute (a batch of 1,000 is one transaction).
    var batchTimeout: Duration { max(timeout, .seconds(60)) }

    /// Imports every user of `file` in `mode` (`skip` or `update`), `batchSize` users per call;
    /// `failure` gets one line per refused record (`line N: reason (code)`), in file order of
    /// the batches, once the batches before it were answered.
    public func importUsers(
        from file: UserImportFile, mode: String, batchSize: Int = IdentityAPI.maxImportBatch, failure: (String) -> Void
    ) async throws -> ImportSummary {
        let client = client, timeout = batchTimeout
        return try await Self.importBatches(from: file, batchSize: batchSize, failure: failure) { users in
            try await client.call(IdentityAPI.importUsers, ImportUsersRequest(users: users, mode: mode), timeout: timeout)
        }
    }

    /// The batches of `file` through `send`, at most two in flight: the next batch is read and
    /// sent while the service still works on the one before, so the file's reading, the service's
    /// checks and its write transaction overlap instead of taking turns. Results are taken in
    /// file order, and `failure` gets the lines in the order a one-at-a-time import gave them
    /// (a batch's unreadable lines, then the lines the service refused). When a call fails, the
    /// batch after it may have been imported too; the error is thrown once that call ended.
    static func importBatches(
        from file: UserImportFile, batchSize: Int, failure: (String) -> Void,
        send: @escaping @Sendable ([ImportedUser]) async throws -> ImportUsersResponse
    ) async throws -> ImportSummary {
        /// A batch sent, its users' line numbers and the unreadable lines read while filling it.
        struct Sent {
            var reply: Task<ImportUsersResponse, any Error>
            var lines: [Int]
            var unreadable: [String]
        }
        var summary = ImportSummary()
        var batch: [ImportedUser] = []
        var lines: [Int] = []
        var unreadable: [String] = []
        // A batch also ends past ~4 MiB of users, far below the RPC message limit (16 MiB).
        var batchBytes = 0
        var inFlight: Sent?
        func collect(_ sent: Sent) async throws {
            sent.unreadable.forEach(failure)
            let reply = try await sent.reply.value
            for result in reply.results {
                switch result.outcome {
                case "created": summary.created += 1
                case "updated": summary.updated += 1
                case "skipped": summary.skipped += 1
                default:
                    summary.failed += 1
                    let line = sent.lines.indices.contains(Int(result.index)) ? sent.lines[Int(result.index)] : -1
                    failure("line \(line): \(result.errorMessage) (\(result.errorCode))")
                }
            }
        }
        /// An unreadable line: said at once when no batch is in flight, else after that batch's
        /// lines (at most a batch of them wait: then the batch in flight is waited for).
        func unreadableLine(_ text: String) async throws {
            guard let previous = inFlight else { return failure(text) }
            unreadable.append(text)
            guard unreadable.count >= batchSize else { return }
            inFlight = nil
            try await collect(previous)
            unreadable.forEach(failure)
            unreadable.removeAll()
        }
        /// Sends the batch read so far, then takes the reply of the one before it.
        func flush(final: Bool) async throws {
            var sent: Sent?
            if !batch.isEmpty {
                let users = batch
                sent = Sent(reply: Task { try await send(users) }, lines: lines, unreadable: unreadable)
            } else if !unreadable.isEmpty {
                sent = Sent(reply: Task { ImportUsersResponse(results: []) }, lines: [], unreadable: unreadable)
            }
            batch.removeAll(keepingCapacity: true)
            lines.removeAll(keepingCapacity: true)
            unreadable.removeAll()
            batchBytes = 0
            let previous = inFlight
            inFlight = sent
            do {
                if let previous { try await collect(previous) }
                if final, let sent {
                    inFlight = nil
                    try await collect(sent)
                }
            } catch {
                // Let the call after the failed one end (it may have been imported) before saying so.
                if let pending = inFlight { _ = await pending.reply.result }
                throw error
            }
        }
        while true {
            let next: ImportFileItem?
            do { next = try file.next() } catch {
                // The file cannot be read further: what was sent is still reported.
                if let previous = inFlight {
                    inFlight = nil
                    try await collect(previous)
                }
                unreadable.forEach(failure)
                throw error
            }
            guard let item = next else { break }
            switch item.user {
            case .success(let user):
                batch.append(user)
                lines.append(item.line)
                batchBytes += user.approximateBytes
                if batch.count >= batchSize || batchBytes >= 4 << 20 { try await flush(final: false) }
            case .failure(let error):
                summary.failed += 1
                try await unreadableLine("line \(item.line): \(error)")
            }
        }
        try await flush(final: true)
        return summary
    }

    /// Writes every user as a jsonl line to `write`, page by page in id order (hashes only with
    /// `includeHashes`); the number of users.
    public func exportUsers(includeHashes: Bool, pageSize: Int = IdentityAPI.maxImportBatch, write: (String) throws -> Void) async throws -> Int {
        var cursor = ""
        var count = 0
        let dates = UserImportFile.isoFormatter()
        repeat {
            let page = try await client.call(
                IdentityAPI.exportUsers, ExportUsersRequest(afterID: cursor, pageSize: Int32(pageSize), includeHashes: includeHashes),
                timeout: batchTimeout)
            var text = ""
            for user in page.users { text += UserImportFile.jsonlLine(user, dates: dates) + "\n" }
            try write(text)
            count += page.users.count
            cursor = page.nextAfterID
        } while !cursor.isEmpty
        return count
    }
}

extension ImportedUser {
    /// About how many bytes the user takes on the wire (its strings), to bound a batch's size.
    var approximateBytes: Int {
        [id, email, displayName, photoURL, passwordHash, customClaimsJSON].reduce(64) { $0 + ($1?.utf8.count ?? 0) }
            + providers.reduce(0) { $0 + $1.utf8.count + 2 }
    }
}
