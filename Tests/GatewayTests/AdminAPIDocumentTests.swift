import Foundation
import GatehouseTestSupport
import HTTPTypes
import Logging
import RPCRouting
import Testing
@testable import Gateway

/// The admin listener's OpenAPI document against what it serves (issue 22 §1).
@Suite("Admin API: OpenAPI document")
struct AdminAPIDocumentTests {
    @Test("every route the admin listener serves is documented, and nothing else; paths use {id} where the router has :id")
    func documentMatchesRoutes() throws {
        let unused = LocalCaller(router: RPCRouter())
        let parts = makeAdminAPI(configuration: AdminAPIConfiguration(port: 0), identity: unused, tokens: unused, logger: Logger(label: "test"))
        let doc = try #require(JSONSerialization.jsonObject(with: Data(AdminOpenAPIDocument.json.utf8)) as? [String: Any])
        let paths = try #require(doc["paths"] as? [String: [String: Any]])
        let documented = Set(paths.flatMap { path, ops in ops.keys.map { "\($0.uppercased()) \(path)" } })
        let served = Set(parts.routes.all.map { "\($0.method.rawValue) \($0.path.replacingOccurrences(of: ":id", with: "{id}"))" })
        #expect(documented == served, "only documented: \(documented.subtracting(served)); only served: \(served.subtracting(documented))")
        // The public document has none of the admin paths.
        let public_ = try #require(JSONSerialization.jsonObject(with: Data(OpenAPIDocument.json.utf8)) as? [String: Any])
        #expect(((public_["paths"] as? [String: Any]) ?? [:]).keys.allSatisfy { !$0.hasPrefix("/admin") })
    }

    @Test("the embedded admin document is the repository's file (scripts/embed-openapi)")
    func embeddedMatchesRepositoryFile() throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/Gateway/Resources/admin-openapi.json")
        let repository = try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? NSDictionary
        let embedded = try JSONSerialization.jsonObject(with: Data(AdminOpenAPIDocument.json.utf8)) as? NSDictionary
        #expect(repository != nil && repository == embedded, "run scripts/embed-openapi")
    }
}
