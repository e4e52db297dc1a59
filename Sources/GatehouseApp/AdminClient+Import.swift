import Foundation
import GatehouseContracts
import GatehouseRPC
import UserTransfer

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
        return try await Self.importBatches(from: { try file.next() }, batchSize: batchSize, failure: failure) { users in
            try await client.call(IdentityAPI.importUsers, ImportUsersRequest(users: users, mode: mode), timeout: timeout)
        }
    }

    /// The records of `next` (a file's `next()`) in batches through `send`, one call in flight
    /// while the next batch is read: the file's reading overlaps the service's work instead of
    /// waiting for it. A batch is sent once the one before it was answered, so batches reach
    /// the service, and commit, in file order (a retried call included): with a user on two
    /// lines, the later line's data is the one an update leaves, as in a one-at-a-time import.
    /// `failure` gets the lines in the order a one-at-a-time import gave them (a batch's
    /// unreadable lines, then the lines the service refused).
    static func importBatches(
        from next: () throws -> ImportFileItem?, batchSize: Int, failure: (String) -> Void,
        send: @escaping @Sendable ([ImportedUser]) async throws -> ImportUsersResponse
    ) async throws -> ImportSummary {
        /// A batch sent and its users' line numbers.
        struct Sent {
            var reply: Task<ImportUsersResponse, any Error>
            var lines: [Int]
        }
        var summary = ImportSummary()
        var batch: [ImportedUser] = []
        var lines: [Int] = []
        var unreadable: [String] = []
        // A batch also ends past ~4 MiB of users, far below the RPC message limit (16 MiB).
        var batchBytes = 0
        var inFlight: Sent?
        func collect(_ sent: Sent) async throws {
            let reply = try await sent.reply.result.get()
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
        /// An unreadable line: said at once when no batch is in flight, else once that batch's
        /// lines were (at most a batch of them wait: then the batch in flight is waited for).
        func unreadableLine(_ text: String) async throws {
            guard let previous = inFlight else { return failure(text) }
            unreadable.append(text)
            guard unreadable.count >= batchSize else { return }
            inFlight = nil
            try await collect(previous)
            unreadable.forEach(failure)
            unreadable.removeAll()
        }
        /// Takes the reply of the batch in flight, then sends the batch read so far (and, when
        /// `final`, takes its reply too).
        func flush(final: Bool) async throws {
            if let previous = inFlight {
                inFlight = nil
                try await collect(previous)
            }
            unreadable.forEach(failure)
            unreadable.removeAll()
            guard !batch.isEmpty else { return }
            let users = batch
            let sent = Sent(reply: Task { try await send(users) }, lines: lines)
            batch.removeAll(keepingCapacity: true)
            lines.removeAll(keepingCapacity: true)
            batchBytes = 0
            if final { try await collect(sent) } else { inFlight = sent }
        }
        while true {
            let item: ImportFileItem?
            do { item = try next() } catch {
                // The file cannot be read further: what was sent is still reported.
                if let previous = inFlight {
                    inFlight = nil
                    try await collect(previous)
                }
                unreadable.forEach(failure)
                throw error
            }
            guard let item else { break }
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
        let dates = UserJSONL.isoFormatter()
        repeat {
            let page = try await client.call(
                IdentityAPI.exportUsers, ExportUsersRequest(afterID: cursor, pageSize: Int32(pageSize), includeHashes: includeHashes),
                timeout: batchTimeout)
            var text = ""
            for user in page.users { text += UserJSONL.line(user, dates: dates) + "\n" }
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
