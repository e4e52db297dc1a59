import Foundation
import GatehouseTestSupport
import Testing

/// `deploy/docker-compose.postgres.yml`: PostgreSQL, two identity instances, two token instances
/// and two gateways (issue 24 §4), checked with `docker-compose config` and run as processes
/// against the test PostgreSQL server.
@Suite("deploy/ with PostgreSQL", .serialized)
struct DeployPostgresTests {
    static let file = "docker-compose.postgres.yml"
    static let secretFiles = ["secrets/postgres-password": "compose-test-password\n"]

    @Test("docker-compose accepts the PostgreSQL variant: two identity and two token instances on one database, two gateways that know every instance, only the gateways publish ports")
    func composeConfig() async throws {
        let project = try await ComposeProject.load(file: Self.file, files: Self.secretFiles)
        defer { project.remove() }
        let services = project.services
        #expect(Set(services.keys) == ["postgres", "identity-1", "identity-2", "token-1", "token-2", "gateway-1", "gateway-2"])
        func environment(_ name: String) -> [String: String] {
            (services[name]?["environment"] as? [String: Any] ?? [:]).mapValues { "\($0)" }
        }
        for (name, service) in services where name != "postgres" {
            let role = String(name.split(separator: "-")[0])
            #expect(service["command"] as? [String] == [role] && environment(name)["GATEHOUSE_ROLE"] == role, "\(name)")
            #expect((service["healthcheck"] as? [String: Any])?["test"] as? [String] == ["CMD", "gatehouse", "healthcheck"], "\(name)")
            #expect((service["ports"] as? [Any] ?? []).isEmpty == (role != "gateway"), "\(name)")
        }
        let postgresPorts = services["postgres"]?["ports"] as? [Any] ?? []
        #expect(postgresPorts.isEmpty, "PostgreSQL publishes no port")
        // The token instances share the database, its password, the key-encryption key and the
        // CURVE key pair; each has its own endpoints and volume.
        let a = environment("token-1"), b = environment("token-2")
        for key in ["GATEHOUSE_TOKEN_DATABASE_URL", "GATEHOUSE_DATABASE_PASSWORD_FILE", "GATEHOUSE_KEY_ENCRYPTION_KEY_FILE", "GATEHOUSE_CURVE_SECRET_KEY_FILE"] {
            #expect(a[key] != nil && a[key] == b[key], "\(key)")
        }
        #expect(a["GATEHOUSE_TOKEN_DATABASE_URL"] == "postgres://gatehouse@postgres:5432/gatehouse?sslmode=disable")
        #expect(a["GATEHOUSE_TOKEN_BIND"] != b["GATEHOUSE_TOKEN_BIND"])
        // The identity instances too: one database (the same as the token instances'), one key pair.
        let i1 = environment("identity-1"), i2 = environment("identity-2")
        for key in ["GATEHOUSE_IDENTITY_DATABASE_URL", "GATEHOUSE_DATABASE_PASSWORD_FILE", "GATEHOUSE_CURVE_SECRET_KEY_FILE"] {
            #expect(i1[key] != nil && i1[key] == i2[key], "\(key)")
        }
        #expect(i1["GATEHOUSE_IDENTITY_DATABASE_URL"] == a["GATEHOUSE_TOKEN_DATABASE_URL"])
        #expect(i1["GATEHOUSE_IDENTITY_BIND"] != i2["GATEHOUSE_IDENTITY_BIND"])
        #expect(i1["GATEHOUSE_ADMIN_PORT"] != i2["GATEHOUSE_ADMIN_PORT"])
        for name in ["token-1", "token-2", "gateway-1", "gateway-2"] {
            #expect(environment(name)["GATEHOUSE_IDENTITY_URL"] == "tcp://identity-1:7001,tcp://identity-2:7041", "\(name)")
        }
        #expect(environment("postgres")["POSTGRES_PASSWORD_FILE"] == "/run/secrets/postgres_password")
        // Every tcp:// URL names, for each instance it lists, the service that binds that port.
        var binder: [Int: String] = [:]
        for name in services.keys {
            for (key, value) in environment(name) where key.hasSuffix("_BIND") {
                for port in LoopbackSubstitution.endpointPorts(value) { binder[port] = name }
            }
        }
        for name in services.keys {
            for (key, value) in environment(name) where key.hasSuffix("_URL") && value.hasPrefix("tcp://") {
                for endpoint in value.split(separator: ",").map(String.init) {
                    let host = endpoint.dropFirst(6).split(separator: ":").first.map(String.init)
                    let port = LoopbackSubstitution.endpointPorts(endpoint).first ?? -1
                    #expect(binder[port] != nil && host == binder[port], "\(name): \(key) lists \(endpoint), but port \(port) is bound by \(binder[port] ?? "nobody")")
                }
            }
        }
        for gateway in ["gateway-1", "gateway-2"] {
            #expect(environment(gateway)["GATEHOUSE_TOKEN_URL"] == "tcp://token-1:7011,tcp://token-2:7021")
            #expect(environment(gateway)["GATEHOUSE_TOKEN_EVENTS_URL"] == "tcp://token-1:7012,tcp://token-2:7022")
        }
        for identity in ["identity-1", "identity-2"] {
            #expect(environment(identity)["GATEHOUSE_TOKEN_URL"] == "tcp://token-1:7011,tcp://token-2:7021")
            #expect(services[identity]?["volumes"] != nil, "\(identity) has its own volume")
        }
        for gateway in ["gateway-1", "gateway-2"] {
            #expect(environment(gateway)["GATEHOUSE_IDENTITY_EVENTS_URL"] == "tcp://identity-1:7002,tcp://identity-2:7042")
        }
        let readme = try String(contentsOf: BuiltProducts.packageRoot.appendingPathComponent("deploy/README.md"), encoding: .utf8)
        for name in services.keys {
            for key in environment(name).keys where key.hasPrefix("GATEHOUSE_") {
                #expect(readme.contains("`\(key)`"), "deploy/README.md does not document \(key)")
            }
        }
    }

    /// The tail of every service's log, for a failure's message.
    static func logs(_ project: ComposeProject) -> String {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: project.root.path).filter { $0.hasSuffix(".log") }.sorted()) ?? []
        return names.map { name in
            let text = (try? String(contentsOf: project.root.appendingPathComponent(name), encoding: .utf8)) ?? ""
            return "\(name):\n\(text.suffix(1500))"
        }.joined(separator: "\n")
    }

    @Test("the PostgreSQL variant's environment, run as processes against a test PostgreSQL server, serves a session through both gateways and both identity instances")
    func composeEnvironment() async throws {
        let project = try await ComposeProject.load(file: Self.file, files: Self.secretFiles)
        defer { project.remove() }
        let server = try await PostgresServer.shared()
        let database = server.url(database: try await server.createDatabase())
        // The documented substitution: the database URL names the test server (trust auth, so the
        // password file is read but not needed).
        let running = try await DeployTests.start(project, external: ["postgres"], overrides: ["GATEHOUSE_TOKEN_DATABASE_URL": database, "GATEHOUSE_IDENTITY_DATABASE_URL": database])
        defer { running.stop() }
        let first = try #require(running.substitution.ports[8080]), second = try #require(running.substitution.ports[8090])
        let stack = Stack()
        let email = "compose-pg-\(UUID().uuidString.prefix(8))@example.com"
        let signUp = try await stack.request("POST", "/v1/accounts", json: ["email": email, "password": "correct horse battery"], port: first)
        #expect(signUp.status == 201, "\(String(decoding: signUp.body, as: UTF8.self))\n\(Self.logs(project))")
        let session = try #require(signUp.json["session"] as? [String: Any])
        let refreshed = try await stack.request(
            "POST", "/v1/sessions/refresh", json: ["refreshToken": try #require(session["refreshToken"] as? String)], port: second)
        #expect(refreshed.status == 200, "\(String(decoding: refreshed.body, as: UTF8.self))")
        let access = try #require((refreshed.json["session"] as? [String: Any])?["accessToken"] as? String)
        for port in [first, second] {
            let me = try await stack.request("GET", "/v1/me", bearer: access, port: port)
            #expect(me.status == 200 && me.json["email"] as? String == email, "\(String(decoding: me.body, as: UTF8.self))")
        }
        for process in running.processes { #expect(process.isRunning) }
    }
}
