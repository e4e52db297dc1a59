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
    /// `failure` gets one line per refused record (`line N: reason (code)`), as it is known.
    public func importUsers(
        from file: UserImportFile, mode: String, batchSize: Int = IdentityAPI.maxImportBatch, failure: (String) -> Void
    ) async throws -> ImportSummary {
        var summary = ImportSummary()
        var batch: [ImportedUser] = []
        var lines: [Int] = []
        // A batch also ends past ~4 MiB of users, far below the RPC message limit (16 MiB).
        var batchBytes = 0
        func send() async throws {
            guard !batch.isEmpty else { return }
            let reply = try await client.call(IdentityAPI.importUsers, ImportUsersRequest(users: batch, mode: mode), timeout: batchTimeout)
            for result in reply.results {
                switch result.outcome {
                case "created": summary.created += 1
                case "updated": summary.updated += 1
                case "skipped": summary.skipped += 1
                default:
                    summary.failed += 1
                    let line = lines.indices.contains(Int(result.index)) ? lines[Int(result.index)] : -1
                    failure("line \(line): \(result.errorMessage) (\(result.errorCode))")
                }
            }
            batch.removeAll(keepingCapacity: true)
            lines.removeAll(keepingCapacity: true)
            batchBytes = 0
        }
        while let item = try file.next() {
            switch item.user {
            case .success(let user):
                batch.append(user)
                lines.append(item.line)
                batchBytes += user.approximateBytes
                if batch.count >= batchSize || batchBytes >= 4 << 20 { try await send() }
            case .failure(let error):
                summary.failed += 1
                failure("line \(item.line): \(error)")
            }
        }
        try await send()
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
