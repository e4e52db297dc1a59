import Foundation
import GatehouseApp
import GatehouseTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `deploy/docker-compose.yml` as `docker-compose config` resolves it (defaults interpolated,
/// paths absolute), read from a temporary copy of `deploy/` whose `secrets/` holds throwaway
/// files, so no real secret is needed or written into the repository.
struct ComposeProject {
    let root: URL
    /// The parsed output of `docker-compose config`.
    let config: [String: Any]

    var services: [String: [String: Any]] { config["services"] as? [String: [String: Any]] ?? [:] }

    /// Secret name → file on disk (from the top-level `secrets:`).
    var secretFiles: [String: String] {
        var files: [String: String] = [:]
        for (name, value) in config["secrets"] as? [String: Any] ?? [:] {
            if let file = (value as? [String: Any])?["file"] as? String { files[name] = file }
        }
        return files
    }

    /// `variables` are what an operator would put in `deploy/.env`; `files` are written into the
    /// copy of `deploy/` (e.g. `secrets/smtp-password`).
    static func load(variables: [String: String] = [:], files: [String: String] = [:]) async throws -> ComposeProject {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("gh-compose-\(UUID().uuidString)")
        let deploy = root.appendingPathComponent("deploy")
        let secrets = deploy.appendingPathComponent("secrets")
        try FileManager.default.createDirectory(at: secrets, withIntermediateDirectories: true)
        for name in ["docker-compose.yml", "Dockerfile"] {
            try FileManager.default.copyItem(
                at: BuiltProducts.packageRoot.appendingPathComponent("deploy/\(name)"), to: deploy.appendingPathComponent(name))
        }
        try await generateSecrets(into: secrets)
        for (name, content) in files { try Data(content.utf8).write(to: deploy.appendingPathComponent(name)) }
        // Only PATH, HOME and `variables`: nothing from the caller's environment (or a deploy/.env) is interpolated.
        let environment = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin", "HOME": root.path]
            .merging(variables) { $1 }
        let composed = try await runProcess(
            try which("docker-compose"), ["-f", deploy.appendingPathComponent("docker-compose.yml").path, "config"],
            environment: environment)
        guard composed.status == 0 else { throw StackError("docker-compose config exited \(composed.status): \(composed.stderr)") }
        // YAML → JSON with PyYAML: the python3 on PATH, else the system one docker-compose itself runs on.
        var json = ProcessResult(status: -1, stdout: "", stderr: "no python3")
        for python in [try? which("python3"), URL(fileURLWithPath: "/usr/bin/python3")].compactMap({ $0 }).filter({ FileManager.default.isExecutableFile(atPath: $0.path) }) where json.status != 0 {
            json = try await runProcess(
                python, ["-c", "import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin)))"],
                environment: environment, stdin: Data(composed.stdout.utf8))
        }
        guard json.status == 0, let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any] else {
            throw StackError("cannot read the output of docker-compose config as YAML: \(json.stderr)")
        }
        return ComposeProject(root: root, config: object)
    }

    /// The secrets an operator makes with `gatehouse keys generate --out DIR` (real CURVE keys,
    /// so the compose-env test runs the service links encrypted and authenticated).
    static func generateSecrets(into folder: URL) async throws {
        let generated = try await runProcess(try gatehouseBinary(), ["keys", "generate", "--out", folder.path], environment: ProcessInfo.processInfo.environment)
        guard generated.status == 0 else { throw StackError("gatehouse keys generate exited \(generated.status): \(generated.stderr)") }
    }

    func remove() { try? FileManager.default.removeItem(at: root) }
}

/// The full path of `tool` on PATH.
func which(_ tool: String) throws -> URL {
    for folder in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
        let candidate = URL(fileURLWithPath: String(folder)).appendingPathComponent(tool)
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
    }
    throw StackError("\(tool) is not on PATH; run scripts/setup")
}

/// `ENV KEY=VALUE` lines of the Dockerfile's last stage (the runtime image).
func imageEnvironment(dockerfile: String) -> [String: String] {
    var environment: [String: String] = [:]
    for line in dockerfile.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) {
        if line.hasPrefix("FROM ") { environment = [:] }
        guard line.hasPrefix("ENV ") else { continue }
        for pair in line.dropFirst(4).split(separator: " ") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { environment[String(parts[0])] = String(parts[1]) }
        }
    }
    return environment
}

/// The documented loopback substitutions that turn a compose service's environment into one
/// for a process on this host (deploy/README.md, "How the compose file is tested"):
/// - the service hostnames `identity` and `token`, and `0.0.0.0`, become `127.0.0.1`;
/// - each container port (in `tcp://` endpoints and `GATEHOUSE_HTTP_PORT`) becomes a free
///   loopback port, the same one everywhere it appears (containers have a network each);
/// - `/data` becomes a folder per service; `/run/secrets/NAME` becomes the file of secret NAME,
///   which the service must declare under `secrets:`.
struct LoopbackSubstitution {
    let ports: [Int: Int]

    init(services: [String: [String: Any]]) {
        var ports: [Int: Int] = [:]
        for service in services.values {
            for value in (service["environment"] as? [String: Any] ?? [:]).values.map({ "\($0)" }) {
                for port in Self.endpointPorts(value) where ports[port] == nil { ports[port] = freeLoopbackPort() }
            }
            for key in ["GATEHOUSE_HTTP_PORT", "GATEHOUSE_ADMIN_PORT"] {
                if let http = (service["environment"] as? [String: Any])?[key].map({ "\($0)" }), let port = Int(http), ports[port] == nil {
                    ports[port] = freeLoopbackPort()
                }
            }
        }
        self.ports = ports
    }

    /// The port of a `tcp://HOST:PORT` value.
    static func endpointPorts(_ value: String) -> [Int] {
        guard value.hasPrefix("tcp://"), let colon = value.lastIndex(of: ":"), let port = Int(value[value.index(after: colon)...]) else { return [] }
        return [port]
    }

    func apply(key: String, value: String, dataDir: URL, secrets: [String: String], declared: [String]) throws -> String {
        if value.hasPrefix("tcp://"), let colon = value.lastIndex(of: ":"), let port = Int(value[value.index(after: colon)...]) {
            let host = String(value[value.index(value.startIndex, offsetBy: 6)..<colon])
            let mappedHost = ["identity", "token", "0.0.0.0"].contains(host) ? "127.0.0.1" : host
            return "tcp://\(mappedHost):\(ports[port] ?? port)"
        }
        if key == "GATEHOUSE_HTTP_PORT" || key == "GATEHOUSE_ADMIN_PORT", let port = Int(value) { return "\(ports[port] ?? port)" }
        if value == "0.0.0.0" { return "127.0.0.1" }
        if value == "/data" { return dataDir.path }
        if value.hasPrefix("/run/secrets/") {
            let name = String(value.dropFirst("/run/secrets/".count))
            guard declared.contains(name), let file = secrets[name] else {
                throw StackError("\(key) names /run/secrets/\(name), but the service does not declare the secret \(name)")
            }
            return file
        }
        return value
    }
}

/// The Dockerfile's stages: each `FROM` line with the `apt-get install` packages of that stage
/// (backslash-continued lines joined).
func dockerStages(_ dockerfile: String) -> [(from: String, packages: [String])] {
    let joined = dockerfile.replacingOccurrences(of: "\\\n", with: " ")
    var stages: [(from: String, packages: [String])] = []
    for line in joined.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) {
        if line.hasPrefix("FROM ") { stages.append((String(line.dropFirst(5)), [])) }
        guard line.hasPrefix("RUN "), let install = line.range(of: "apt-get install"), !stages.isEmpty else { continue }
        let words = line[install.upperBound...].split(separator: " ").prefix { $0 != "&&" }
        stages[stages.count - 1].packages += words.filter { !$0.hasPrefix("-") }.map(String.init)
    }
    return stages
}

@Suite("deploy/", .serialized)
struct DeployTests {
    @Test("the Dockerfile matches the package: Swift version, product, build packages, and every library the binary links")
    func dockerfile() async throws {
        let dockerfile = try String(contentsOf: BuiltProducts.packageRoot.appendingPathComponent("deploy/Dockerfile"), encoding: .utf8)
        let manifest = try String(contentsOf: BuiltProducts.packageRoot.appendingPathComponent("Package.swift"), encoding: .utf8)
        let stages = dockerStages(dockerfile)
        try #require(stages.count == 2, "\(stages)")
        let tools = try #require(manifest.split(separator: "\n").first?.split(separator: ":").last)
        #expect(stages[0].from.hasPrefix("swift:\(tools)-bookworm "), "build stage \(stages[0].from) vs tools-version \(tools)")
        #expect(stages[1].from == "debian:bookworm-slim")
        #expect(dockerfile.contains("swift build -c release --static-swift-stdlib --product gatehouse"))
        #expect(manifest.contains(#".executable(name: "gatehouse""#))
        #expect(dockerfile.contains(#"ENTRYPOINT ["gatehouse"]"#))
        #expect(dockerfile.contains(#"CMD ["gatehouse", "healthcheck"]"#))
        #expect(dockerfile.contains("USER gatehouse"))

        // The build stage installs what scripts/setup installs for building (not the test tools).
        let setup = try String(contentsOf: BuiltProducts.packageRoot.appendingPathComponent("scripts/setup"), encoding: .utf8)
        let aptLine = try #require(setup.split(separator: "\n").first { $0.contains("for p in libzmq3-dev") })
        let listed = try #require(aptLine.range(of: " in ").map { aptLine[$0.upperBound...] }?.split(separator: ";").first)
        let setupPackages = Set(listed.split(separator: " ").map(String.init))
        #expect(setupPackages.subtracting(["docker-compose"]).isSubset(of: Set(stages[0].packages)), "setup: \(setupPackages), Dockerfile: \(stages[0].packages)")

        // Every shared library the binary links, outside the Swift toolchain (static in the image),
        // comes from a runtime package the image installs or from bookworm-slim's required set.
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/dpkg") else { return }
        let binary = try gatehouseBinary()
        let needed = try await runProcess(try which("readelf"), ["-d", binary.path], environment: ProcessInfo.processInfo.environment)
        let resolved = try await runProcess(try which("ldd"), [binary.path], environment: ProcessInfo.processInfo.environment)
        let names = needed.stdout.split(separator: "\n").compactMap { line -> String? in
            guard line.contains("(NEEDED)"), let open = line.firstIndex(of: "["), let close = line.lastIndex(of: "]") else { return nil }
            return String(line[line.index(after: open)..<close])
        }
        #expect(names.contains("libzmq.so.5"))
        let installed = Set(stages[1].packages).union(["libc6", "libgcc-s1"])
        for name in names {
            let path = resolved.stdout.split(separator: "\n").first { $0.contains("\(name) => ") }.map(String.init) ?? ""
            if path.contains("swift") || name.hasPrefix("libswift") { continue }
            let owner = try await runProcess(URL(fileURLWithPath: "/usr/bin/dpkg"), ["-S", "*/\(name)"], environment: ProcessInfo.processInfo.environment)
            let package = owner.stdout.split(separator: ":").first.map(String.init) ?? "?"
            #expect(installed.contains(package), "the binary links \(name) from \(package), which the runtime image does not install")
        }
    }

    @Test("docker-compose accepts the file; only the gateway publishes a port; every service has its role, healthcheck and documented variables")
    func composeConfig() async throws {
        let project = try await ComposeProject.load()
        defer { project.remove() }
        let services = project.services
        #expect(Set(services.keys) == ["identity", "token", "gateway"])
        for (name, service) in services {
            #expect(service["image"] as? String == "gatehouse:latest")
            #expect(service["command"] as? [String] == [name])
            #expect(service["restart"] as? String == "unless-stopped")
            let environment = service["environment"] as? [String: Any] ?? [:]
            #expect(environment["GATEHOUSE_ROLE"] as? String == name)
            let check = (service["healthcheck"] as? [String: Any])?["test"] as? [String]
            #expect(check == ["CMD", "gatehouse", "healthcheck"], "\(name)")
            let ports = service["ports"] as? [Any] ?? []
            #expect(ports.isEmpty == (name != "gateway"), "\(name) publishes \(ports)")
        }
        let published = (services["gateway"]?["ports"] as? [Any])?.map { "\($0)" } ?? []
        #expect(published.count == 1 && published[0].contains("8080:8080"), "\(published)")
        let tokenDeps = services["token"]?["depends_on"] as? [String: Any] ?? [:]
        #expect(Set(tokenDeps.keys) == ["identity"])
        #expect(Set((services["gateway"]?["depends_on"] as? [String: Any] ?? [:]).keys) == ["identity", "token"])

        // Loopback runs cannot tell hosts apart, so check here that each tcp:// URL names the
        // service that binds its port.
        var binder: [Int: String] = [:]
        for (name, service) in services {
            for (key, value) in service["environment"] as? [String: Any] ?? [:] where key.hasSuffix("_BIND") {
                for port in LoopbackSubstitution.endpointPorts("\(value)") { binder[port] = name }
            }
        }
        for (name, service) in services {
            for (key, value) in service["environment"] as? [String: Any] ?? [:] where key.hasSuffix("_URL") && "\(value)".hasPrefix("tcp://") {
                let text = "\(value)"
                let host = text.dropFirst(6).split(separator: ":").first.map(String.init)
                let port = LoopbackSubstitution.endpointPorts(text).first ?? -1
                #expect(binder[port] != nil && host == binder[port], "\(name): \(key)=\(text), but port \(port) is bound by \(binder[port] ?? "nobody")")
            }
        }

        // Every interpolated variable is in .env.example; every GATEHOUSE_* key is in the deploy README.
        let compose = try String(contentsOf: BuiltProducts.packageRoot.appendingPathComponent("deploy/docker-compose.yml"), encoding: .utf8)
        let example = try String(contentsOf: BuiltProducts.packageRoot.appendingPathComponent("deploy/.env.example"), encoding: .utf8)
        let readme = try String(contentsOf: BuiltProducts.packageRoot.appendingPathComponent("deploy/README.md"), encoding: .utf8)
        let yamlLines = compose.split(separator: "\n").filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("#") }
        let interpolated = Set(yamlLines.joined(separator: "\n").components(separatedBy: "${").dropFirst().compactMap {
            $0.split(whereSeparator: { ":}-".contains($0) }).first.map(String.init)
        })
        let documented = Set(example.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap { $0.split(separator: "=").first.map(String.init) })
        #expect(!interpolated.isEmpty)
        #expect(interpolated.subtracting(documented).isEmpty, "deploy/.env.example lacks \(interpolated.subtracting(documented).sorted())")
        #expect(documented.subtracting(interpolated).isEmpty, "deploy/.env.example lists unused \(documented.subtracting(interpolated).sorted())")
        for service in services.values {
            for key in (service["environment"] as? [String: Any] ?? [:]).keys {
                #expect(readme.contains("`\(key)`"), "deploy/README.md does not document \(key)")
            }
        }
    }

    /// Runs the compose file's three services as processes (the documented loopback
    /// substitutions), each started once its dependencies pass their healthcheck.
    static func start(_ project: ComposeProject) async throws -> RunningCompose {
        let services = project.services
        let substitution = LoopbackSubstitution(services: services)
        let dockerfile = try String(contentsOf: BuiltProducts.packageRoot.appendingPathComponent("deploy/Dockerfile"), encoding: .utf8)
        let image = imageEnvironment(dockerfile: dockerfile)
        let binary = try gatehouseBinary()
        let running = RunningCompose(substitution: substitution)

        // Each service's environment: the image's ENV, overridden by compose's, made local, plus PATH.
        var environments: [String: [String: String]] = [:]
        for (name, service) in services {
            let dataDir = project.root.appendingPathComponent("data-\(name)")
            try FileManager.default.createDirectory(at: dataDir, withIntermediateDirectories: true)
            let declared = (service["secrets"] as? [Any] ?? []).compactMap { ($0 as? [String: Any])?["source"] as? String ?? $0 as? String }
            var environment: [String: String] = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]
            var merged = image
            for (key, value) in service["environment"] as? [String: Any] ?? [:] { merged[key] = "\(value)" }
            for (key, value) in merged {
                environment[key] = try substitution.apply(key: key, value: value, dataDir: dataDir, secrets: project.secretFiles, declared: declared)
            }
            environments[name] = environment
        }

        // Start in depends_on order, each once its dependencies pass their healthcheck.
        var healthy: Set<String> = []
        while healthy.count < services.count {
            let ready = services.keys.sorted().filter { name in
                !healthy.contains(name) && Set((services[name]?["depends_on"] as? [String: Any] ?? [:]).keys).isSubset(of: healthy)
            }
            let name = try #require(ready.first, "depends_on has a cycle")
            let service = services[name] ?? [:]
            let log = project.root.appendingPathComponent("\(name).log")
            running.processes.append(try launchProcess(binary, service["command"] as? [String] ?? [], environment: environments[name], log: log))
            let check = (service["healthcheck"] as? [String: Any])?["test"] as? [String] ?? []
            try #require(check.prefix(3) == ["CMD", "gatehouse", "healthcheck"], "\(check)")
            do {
                try await waitHealthy(Array(check.dropFirst(3)), environment: environments[name] ?? [:])
            } catch {
                let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
                throw StackError("\(name) did not become healthy: \(error)\n\(name)'s log:\n\(output.suffix(2000))")
            }
            healthy.insert(name)
        }

        return running
    }

    @Test("the compose environment, run as three processes, passes the healthchecks and the README's smoke test")
    func composeEnvironment() async throws {
        let project = try await ComposeProject.load()
        defer { project.remove() }
        let running = try await Self.start(project)
        defer { running.stop() }
        let substitution = running.substitution
        let processes = running.processes
        // The smoke test from deploy/README.md, against the gateway's published port.
        let readme = try String(contentsOf: BuiltProducts.packageRoot.appendingPathComponent("deploy/README.md"), encoding: .utf8)
        let start = try #require(readme.range(of: "<!-- smoke -->\n```sh\n"))
        let end = try #require(readme.range(of: "```\n<!-- /smoke -->"))
        let script = String(readme[start.upperBound..<end.lowerBound])
        #expect(script.contains("localhost:8080"))
        let port = try #require(substitution.ports[8080])
        let smoke = try await runProcess(
            URL(fileURLWithPath: "/bin/bash"),
            ["-euo", "pipefail", "-c", script.replacingOccurrences(of: "localhost:8080", with: "127.0.0.1:\(port)")],
            environment: ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"])
        #expect(smoke.status == 0, "\(smoke.stderr)")
        #expect(smoke.stdout.hasPrefix(#"{"status":"ready"}"#), "\(smoke.stdout)")
        #expect(smoke.stdout.contains(#"@example.com","#), "sign-up and /v1/me print the user: \(smoke.stdout)")
        #expect(smoke.stdout.components(separatedBy: #""accessToken""#).count == 3, "sign-up and refresh each print a session: \(smoke.stdout)")
        #expect(!smoke.stdout.contains("\"code\""), "an error came back: \(smoke.stdout)")
        for process in processes { #expect(process.isRunning) }
    }

    @Test("the mail settings of deploy/.env reach the identity service: a password reset mail arrives at the relay, from MAIL_FROM, naming APP_NAME, linking to PUBLIC_URL")
    func composeRelay() async throws {
        let relay = try await SMTPHarness.start()
        defer { relay.stop() }
        let project = try await ComposeProject.load(
            variables: [
                "GATEHOUSE_SMTP_HOST": "127.0.0.1", "GATEHOUSE_SMTP_PORT": "\(relay.port)", "GATEHOUSE_SMTP_TLS": "none",
                "GATEHOUSE_SMTP_PASSWORD_SECRET": "./secrets/smtp-password", "GATEHOUSE_MAIL_FROM": "Example <no-reply@example.com>",
                "GATEHOUSE_APP_NAME": "Example App", "GATEHOUSE_PUBLIC_URL": "https://auth.example.test",
            ],
            files: ["secrets/smtp-password": "unused-without-a-user-name\n"])
        defer { project.remove() }
        let identity = project.services["identity"]?["environment"] as? [String: Any] ?? [:]
        #expect(identity["GATEHOUSE_SMTP_PASSWORD_FILE"] as? String == "/run/secrets/smtp_password")
        #expect(project.secretFiles["smtp_password"]?.hasSuffix("/deploy/secrets/smtp-password") == true)
        for (name, service) in project.services {
            let text = "\(service["environment"] ?? "")"
            #expect(!text.contains("unused-without-a-user-name"), "\(name)'s environment holds the SMTP password")
        }
        let running = try await Self.start(project)
        defer { running.stop() }
        let port = try #require(running.substitution.ports[8080])
        let script = """
            curl -fsS -X POST 127.0.0.1:\(port)/v1/accounts -H 'Content-Type: application/json' \\
              -d '{"email":"relay@example.com","password":"correct horse battery staple"}' > /dev/null
            curl -fsS -X POST 127.0.0.1:\(port)/v1/password-reset -H 'Content-Type: application/json' -d '{"email":"relay@example.com"}'
            """
        let requested = try await runProcess(
            URL(fileURLWithPath: "/bin/bash"), ["-euo", "pipefail", "-c", script],
            environment: ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"])
        #expect(requested.status == 0, "\(requested.stderr)")
        try await waitUntil("the reset mail at the relay") { try relay.messages().count == 1 }
        let mail = try #require(try relay.messages().first)
        #expect(mail.rcpt_tos == ["relay@example.com"] && mail.mail_from == "no-reply@example.com")
        #expect(mail.header("From") == "Example <no-reply@example.com>")
        #expect(mail.header("Subject")?.contains("Example App") == true, "\(mail.header("Subject") ?? "")")
        #expect(mail.data.contains("X-Gatehouse-Kind: password_reset"))
        let text = MailboxReader.parse(mail.data).text
        #expect(text.contains("https://auth.example.test/actions?mode=resetPassword&code="), "\(text)")
    }
}

/// The compose services running as processes.
final class RunningCompose: @unchecked Sendable {
    let substitution: LoopbackSubstitution
    var processes: [ChildProcess] = []

    init(substitution: LoopbackSubstitution) { self.substitution = substitution }

    /// Stops every process.
    func stop() {
        for process in processes where process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }
}
