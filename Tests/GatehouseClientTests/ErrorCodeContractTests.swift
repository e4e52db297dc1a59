import Foundation
import GatehouseContracts
import Gateway
import HTTPTypes
import Testing

@testable import GatehouseClient

/// The client library's problem codes tied to the contract (`ErrorCode`) and the gateway's error
/// table (`ErrorTable`): every code the public API can answer is one the library knows, read as
/// the case it means at the status the gateway sends it with, and the library names no code the
/// server does not have.
@Suite("GatehouseClient's error codes against the contract and the gateway's error table")
struct ErrorCodeContractTests {
    /// Codes only the admin listener (`/admin/v1`) answers: the library does not call it.
    static let adminOnly: Set<ErrorCode> = [.invalidAdminKey, .insufficientScope, .adminKeyNotFound]

    /// Every code a client of the public API can read in a problem's `code` (each row's public
    /// code), with the HTTP status the gateway sends it with.
    static let sendable: [String: Int] = {
        var result: [String: Int] = [:]
        for code in ErrorTable.entries.keys where !adminOnly.contains(code) {
            let sent = ErrorTable.entry(code).publicCode ?? code
            result[sent.rawValue] = ErrorTable.entry(sent).status.code
        }
        return result
    }()

    /// Every code that exists: the contract's and the gateway's own (the table's rows).
    static let existing = Set(ErrorCode.all.map(\.rawValue)).union(ErrorTable.entries.keys.map(\.rawValue))

    static let known = GatehouseError.mappedCodes.union(GatehouseError.serverCodes)

    /// A problem body as the gateway writes it, with the members `migration_required` carries.
    static func problem(_ code: String, status: Int) throws -> Data {
        try JSONSerialization.data(withJSONObject: [
            "type": "https://gatehouse.dev/errors/\(code)", "title": code, "status": status, "detail": "detail of \(code)",
            "code": code, "anonymousUserId": "a", "existingUserId": "e", "resumeHandle": "h", "resumeHandleExpiresIn": 60,
        ])
    }

    @Test("the table was read: the public codes are there, the admin ones and the internal aliases are not")
    func sendableIsRead() {
        #expect(Self.sendable["invalid_credentials"] == 401)
        #expect(Self.sendable["service_unavailable"] == 503)
        #expect(Self.sendable["unavailable"] == nil && Self.sendable["deadline_exceeded"] == nil)
        #expect(Self.sendable["invalid_admin_key"] == nil)
        #expect(Self.adminOnly.allSatisfy { ErrorTable.entries[$0] != nil }, "an admin-only code left the table")
    }

    @Test("every code the gateway's public API can send is one the client library knows")
    func everySentCodeIsKnown() {
        let unknown = Set(Self.sendable.keys).subtracting(Self.known).sorted()
        #expect(unknown.isEmpty, "codes the gateway sends that GatehouseClient does not know: \(unknown)")
    }

    @Test("the client library names no code that does not exist, or that the public API never sends")
    func everyKnownCodeExists() {
        let invented = Self.known.subtracting(Self.existing).sorted()
        #expect(invented.isEmpty, "codes GatehouseClient names that neither the contract nor the gateway has: \(invented)")
        let neverSent = Self.known.subtracting(Self.sendable.keys).sorted()
        #expect(neverSent.isEmpty, "codes GatehouseClient names that the public API never sends: \(neverSent)")
        let both = GatehouseError.mappedCodes.intersection(GatehouseError.serverCodes).sorted()
        #expect(both.isEmpty, "codes both mapped and left as .server: \(both)")
    }

    @Test("each mapped code, at the gateway's status, is a case of its own carrying that code")
    func mappedCodesHaveTheirCase() throws {
        for code in GatehouseError.mappedCodes.sorted() {
            guard let status = Self.sendable[code] else { continue }  // reported by everyKnownCodeExists
            let error = GatehouseError.fromProblem(status: status, body: try Self.problem(code, status: status), retryAfter: "1")
            if case .server = error { Issue.record("\(code) (\(status)) fell through to \(error)") }
            #expect(error.code == code, "\(code) (\(status)) read as \(error)")
        }
    }

    @Test("each code left to .server arrives as .server with its status, code and detail")
    func serverCodesPassThrough() throws {
        for code in GatehouseError.serverCodes.sorted() {
            guard let status = Self.sendable[code] else { continue }
            let error = GatehouseError.fromProblem(status: status, body: try Self.problem(code, status: status), retryAfter: nil)
            #expect(error == .server(status: status, code: code, message: "detail of \(code)"), "\(code) (\(status)) read as \(error)")
        }
    }
}
