import AsyncHTTPClient
import Foundation
import GatehouseContracts
import NIOCore
import NIOHTTP1
import ProtoCodec
import UserTransfer

// `gatehouse users import|export` and `gatehouse audit` through the admin API (issue 37 §2), so
// they work against every shape of deployment with an admin API key: the same batches, jsonl and
// pages as the direct path over the identity service's RPC link.
extension AdminAPIClient {
    /// An import batch's deadline: at least a minute (a batch of 1,000 is one transaction).
    var batchTimeout: TimeInterval { max(timeout, 60) }

    /// Imports every user of `file` in `mode` through `POST /admin/v1/users/import`, `batchSize`
    /// users per request, one request in flight while the next batch is read; `failure` gets
    /// one line per refused record, as the direct path words it.
    public func importUsers(
        from file: UserImportFile, mode: String, batchSize: Int = IdentityAPI.maxImportBatch, failure: (String) -> Void
    ) async throws -> ImportSummary {
        try await AdminClient.importBatches(from: { try file.next() }, batchSize: batchSize, failure: failure) { users in
            try await self.importBatch(users, mode: mode)
        }
    }

    /// One batch as the contract's `ImportUsersRequest` in the protobuf wire format (the admin
    /// route's fast form: no JSON lines to write here and read there); the reply's results as
    /// `identity.importUsers` gives them (item N is "line" N + 1).
    func importBatch(_ users: [ImportedUser], mode: String) async throws -> ImportUsersResponse {
        let body = try ProtobufEncoder().encode(ImportUsersRequest(users: users, mode: mode))
        // Only the failed items are listed (the counts tell the rest): a thousand results a batch
        // to write and read back cost about a third of an HTTP import's time.
        let reply = try await call(
            "POST", "admin/v1/users/import", query: [("mode", mode), ("results", "failed")], rawBody: Data(body),
            contentType: "application/x-protobuf", timeout: batchTimeout)
        var results = (reply["results"] as? [[String: Any]] ?? []).compactMap { result -> ImportResult? in
            guard let line = result["line"] as? Int, let outcome = result["outcome"] as? String else { return nil }
            return ImportResult(
                index: Int32(line - 1), outcome: outcome, userID: result["userId"] as? String ?? "", errorCode: result["code"] as? String ?? "",
                errorMessage: result["message"] as? String ?? "")
        }
        for outcome in ["created", "updated", "skipped"] {
            let count = reply[outcome] as? Int ?? 0
            results.append(contentsOf: repeatElement(ImportResult(index: -1, outcome: outcome), count: count))
        }
        guard results.count == users.count else {
            throw Failure(status: 200, code: "internal", detail: "the admin API answered \(results.count) results for \(users.count) users")
        }
        return ImportUsersResponse(results: results)
    }

    /// Streams every user as jsonl from `GET /admin/v1/users/export` to `write` as it arrives
    /// (hashes only with `includeHashes`); the number of users. An export cut short (the
    /// response's end never came) throws, so a partial file is never taken for a whole one.
    public func exportUsers(includeHashes: Bool, write: (String) throws -> Void) async throws -> Int {
        var request = HTTPClientRequest(url: baseURL.appendingPathComponent("admin/v1/users/export").absoluteString + "?includeHashes=\(includeHashes)")
        request.headers.add(name: "Authorization", value: "Bearer \(key)")
        let response: HTTPClientResponse
        do {
            response = try await HTTPClient.shared.execute(request, timeout: .seconds(Int64(batchTimeout)))
        } catch {
            throw unreachable(error)
        }
        guard response.status == .ok else {
            let body = try? await response.body.collect(upTo: 1 << 20)
            throw Self.problem(status: Int(response.status.code), body: Data(body?.readableBytesView ?? ByteBuffer().readableBytesView))
        }
        var count = 0
        var pending: [UInt8] = []
        do {
            for try await chunk in response.body {
                pending.append(contentsOf: chunk.readableBytesView)
                guard let last = pending.lastIndex(of: UInt8(ascii: "\n")) else { continue }
                let whole = pending[...last]
                count += whole.reduce(0) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
                try write(String(decoding: whole, as: UTF8.self))
                pending.removeSubrange(...last)
            }
        } catch let error as Failure {
            throw error
        } catch {
            throw Failure(status: 200, code: "unavailable", detail: "the export was cut short after \(count) users (\(error)); run it again")
        }
        guard pending.isEmpty else {
            throw Failure(status: 200, code: "internal", detail: "the export ended inside a line after \(count) users; run it again")
        }
        return count
    }

    /// A page of `GET /admin/v1/audit` after `cursor` ("" from the start): the events, oldest
    /// first, the next cursor, and whether more exist already.
    func auditPage(after cursor: String, userID: String, since: Date?, limit: Int) async throws
        -> (events: [AuditReader.Entry], next: String, more: Bool)
    {
        var query: [(String, String)] = [("limit", "\(limit)")]
        if !cursor.isEmpty { query.append(("cursor", cursor)) }
        if !userID.isEmpty { query.append(("userId", userID)) }
        if let since { query.append(("since", AuditReader.timestamp(since))) }
        let page = try await call("GET", "admin/v1/audit", query: query)
        let events = try (page["events"] as? [[String: Any]] ?? []).map(AuditReader.Entry.init(adminJSON:))
        return (events, page["nextCursor"] as? String ?? cursor, page["more"] as? Bool ?? false)
    }
}

extension AuditReader.Entry {
    /// An event as the admin API's `GET /admin/v1/audit` gives it.
    init(adminJSON object: [String: Any]) throws {
        guard let sourceName = object["source"] as? String, let source = AuditReader.Source(rawValue: sourceName),
            let seq = (object["seq"] as? NSNumber)?.uint64Value, let kind = object["kind"] as? String, let actor = object["actor"] as? String,
            let time = object["occurredAt"] as? String, let occurredAt = UserJSONL.parseISO8601(time)
        else { throw AdminAPIClient.Failure(status: 200, code: "internal", detail: "the admin API sent an audit event this command cannot read") }
        var event = AuditEvent(seq: seq, occurredAt: occurredAt, kind: kind, actor: actor)
        event.userID = object["userId"] as? String ?? ""
        event.reason = object["reason"] as? String ?? ""
        event.email = object["email"] as? String ?? ""
        event.ip = object["ip"] as? String ?? ""
        event.userAgent = object["userAgent"] as? String ?? ""
        event.sessionID = object["sessionId"] as? String ?? ""
        if let detail = object["detail"], !(detail is NSNull),
            let data = try? JSONSerialization.data(withJSONObject: detail, options: [.sortedKeys, .withoutEscapingSlashes]),
            data != Data("{}".utf8)
        {
            event.detailJSON = String(decoding: data, as: UTF8.self)
        }
        self.init(source: source, event: event)
    }
}
