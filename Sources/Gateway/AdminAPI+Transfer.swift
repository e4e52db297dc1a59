import Foundation
import GatehouseContracts
import GatehouseSupport
import Hummingbird
import HTTPTypes
import NIOCore
import ProtoCodec
import RPCRouting
import UserTransfer

// Bulk import and export over the admin API (issue 37 §2): the jsonl form of users
// (`UserJSONL`, the format of `gatehouse users import|export`), so they work against every shape
// of deployment (`gatehouse serve`, three processes, compose) with an admin API key instead of
// the identity service's own link key.
extension AdminRoutes {
    /// The largest import body: a batch of 1,000 users of up to 4 KiB each.
    static let importBodyLimit = 4 << 20

    /// The content types an import body may have: JSON lines.
    static let jsonLinesTypes = ["application/x-ndjson", "application/jsonl", "application/json-lines"]

    /// `POST /admin/v1/users/import?mode=skip|update&results=all|failed` (users:import): a body of at
    /// most 1,000 jsonl lines, imported in one `identity.importUsers` call (one transaction). 200
    /// with the counts and one result per non-blank line (`line` is 1-based), or only the failed
    /// ones with `results=failed` (what the CLI asks: the counts tell the rest); a line that is not
    /// a user is `failed` with `invalid_argument` and the others are imported. Audited as
    /// `users.imported` with the key as the actor.
    @Sendable func importUsers(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let actor = try await authorize(request, AdminKey.Scope.usersImport)
        let mode = request.uri.queryParameters.get("mode") ?? "skip"
        guard mode == "skip" || mode == "update" else { throw GatewayError.invalidArgument("`mode` must be skip or update.") }
        let listed = request.uri.queryParameters.get("results") ?? "all"
        guard listed == "all" || listed == "failed" else { throw GatewayError.invalidArgument("`results` must be all or failed.") }
        let type = request.headers[.contentType]?.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        let binary = type == Self.protobufType
        guard let type, binary || Self.jsonLinesTypes.contains(type) else {
            throw GatewayError(.unsupportedMediaType, detail: "The body must be JSON lines (Content-Type: application/x-ndjson), one user per line.")
        }
        var body = request
        let buffer: ByteBuffer
        do { buffer = try await body.collectBody(upTo: Self.importBodyLimit) } catch is NIOTooManyBytesError {
            throw GatewayError.payloadTooLarge(Self.importBodyLimit)
        }
        let parsed = binary ? try Self.importMessage(buffer.readableBytesView) : Self.importLines(buffer.readableBytesView)
        guard parsed.users.count + parsed.refused.count <= IdentityAPI.maxImportBatch else {
            throw GatewayError.invalidArgument("At most \(IdentityAPI.maxImportBatch) users per request; send the rest in further requests.")
        }
        var results: [(line: Int, result: ImportResult)] = parsed.refused.map {
            ($0.line, ImportResult(index: -1, outcome: "failed", errorCode: ErrorCode.invalidArgument.rawValue, errorMessage: $0.reason))
        }
        if !parsed.users.isEmpty {
            let reply = try await withBackendTimeout(max(configuration.requestTimeout, .seconds(60))) { [identity] in
                try await identity.call(IdentityAPI.importUsers, ImportUsersRequest(users: parsed.users, mode: mode, actor: actor))
            }
            for result in reply.results where parsed.lines.indices.contains(Int(result.index)) {
                results.append((parsed.lines[Int(result.index)], result))
            }
        }
        results.sort { $0.line < $1.line }
        var counts: [String: Int] = ["created": 0, "updated": 0, "skipped": 0, "failed": 0]
        var w = JSONObjectWriter()
        for (_, result) in results { counts[result.outcome, default: 0] += 1 }
        if listed == "failed" { results.removeAll { $0.result.outcome != "failed" } }
        w.rawArray("results", results.map { line, result in
            var r = JSONObjectWriter()
            r.int("line", line)
            r.string("outcome", result.outcome)
            if !result.userID.isEmpty { r.string("userId", result.userID) }
            if result.outcome == "failed" {
                r.string("code", result.errorCode)
                r.string("message", result.errorMessage)
            }
            return r.finish()
        })
        for outcome in ["created", "updated", "skipped", "failed"] { w.int(outcome, counts[outcome] ?? 0) }
        return Self.json(.ok, w.finish())
    }

    /// The content type of a body that is the contract's `ImportUsersRequest` in the protobuf
    /// wire format (`gatehouse users import` sends it: no JSON to write and read back for a
    /// thousand users). Only its `users` count; `mode` is the query's and the actor the key.
    static let protobufType = "application/x-protobuf"

    /// The users of a protobuf `ImportUsersRequest`, numbered from 1 as lines would be.
    static func importMessage(_ bytes: ByteBufferView) throws -> (users: [ImportedUser], lines: [Int], refused: [(line: Int, reason: String)]) {
        let message: ImportUsersRequest
        do { message = try ProtobufDecoder().decode(ImportUsersRequest.self, from: Array(bytes)) } catch {
            throw GatewayError(.malformedRequest, detail: "The body is not an ImportUsersRequest in the protobuf wire format.")
        }
        return (message.users, Array(1..<(message.users.count + 1)), [])
    }

    /// The users of a jsonl body, with their line numbers, and the lines that are not users.
    /// Blank lines are skipped (they still count in the numbering); a CR before the LF is dropped.
    static func importLines(_ bytes: ByteBufferView) -> (users: [ImportedUser], lines: [Int], refused: [(line: Int, reason: String)]) {
        var users: [ImportedUser] = []
        var lines: [Int] = []
        var refused: [(line: Int, reason: String)] = []
        var number = 0
        var start = bytes.startIndex
        while start < bytes.endIndex {
            number += 1
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.endIndex
            var line = Array(bytes[start..<end])
            if line.last == UInt8(ascii: "\r") { line.removeLast() }
            start = end < bytes.endIndex ? bytes.index(after: end) : end
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
            do {
                users.append(try UserJSONL.user(fromLine: line))
                lines.append(number)
            } catch {
                refused.append((number, "\(error)"))
            }
        }
        return (users, lines, refused)
    }

    /// `GET /admin/v1/users/export?includeHashes=true|false` (users:export): every user as a
    /// jsonl line, in id order, streamed (`application/x-ndjson`, chunked) a page of 1,000 at a
    /// time; password hashes only with `includeHashes=true`. A failure after the first byte ends
    /// the response without its last chunk, so a client never takes a cut export for a whole one.
    @Sendable func exportUsers(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        _ = try await authorize(request, AdminKey.Scope.usersExport)
        let includeHashes = try Self.bool(request.uri.queryParameters.get("includeHashes"), "includeHashes") ?? false
        // The first page before the head, so an unavailable service is a problem, not a cut stream.
        let timeout = max(configuration.requestTimeout, .seconds(60))
        let identity = identity
        let first = try await withBackendTimeout(timeout) {
            try await identity.call(IdentityAPI.exportUsers, ExportUsersRequest(afterID: "", pageSize: 0, includeHashes: includeHashes))
        }
        let headers: HTTPFields = [.contentType: "application/x-ndjson", .cacheControl: "no-store"]
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in
            let dates = UserJSONL.isoFormatter()
            var page = first
            while true {
                var text = ""
                for user in page.users { text += UserJSONL.line(user, dates: dates) + "\n" }
                if !text.isEmpty { try await writer.write(ByteBuffer(string: text)) }
                guard !page.nextAfterID.isEmpty else { break }
                let cursor = page.nextAfterID
                page = try await withBackendTimeout(timeout) {
                    try await identity.call(IdentityAPI.exportUsers, ExportUsersRequest(afterID: cursor, pageSize: 0, includeHashes: includeHashes))
                }
            }
            try await writer.finish(nil)
        })
    }
}
