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
    /// `file` is the compose file of `deploy/` to read (`docker-compose.yml`, or the
    /// PostgreSQL variant `docker-compose.postgres.yml`).
    static func load(
        file: String = "docker-compose.yml", variables: [String: String] = [:], files: [String: String] = [:]
    ) async throws -> ComposeProject {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("gh-compose-\(UUID().uuidString)")
        let deploy = root.appendingPathComponent("deploy")
        let secrets = deploy.appendingPathComponent("secrets")
        try FileManager.default.createDirectory(at: secrets, withIntermediateDirectories: true)
        for name in [file, "Dockerfile"] {
            try FileManager.default.copyItem(
                at: BuiltProducts.packageRoot.appendingPathComponent("deploy/\(name)"), to: deploy.appendingPathComponent(name))
        }
        try await generateSecrets(into: secrets)
        for (name, content) in files { try Data(content.utf8).write(to: deploy.appendingPathComponent(name)) }
        // Only PATH, HOME and `variables`: nothing from the caller's environment (or a deploy/.env) is interpolated.
        let environment = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin", "HOME": root.path]
            .merging(variables) { $1 }
        let composed = try await runProcess(
            try which("docker-compose"), ["-f", deploy.appendingPathComponent(file).path, "config"],
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
/// - the service hostnames (`identity`, `token`, and their numbered instances) and `0.0.0.0`, become `127.0.0.1`;
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
        value.split(separator: ",").compactMap { endpoint -> Int? in
            guard endpoint.hasPrefix("tcp://"), let colon = endpoint.lastIndex(of: ":") else { return nil }
            return Int(endpoint[endpoint.index(after: colon)...])
        }
    }

    /// The service hostnames of the compose files, which become 127.0.0.1.
    static let hosts: Set<String> = ["identity", "identity-1", "identity-2", "token", "token-1", "token-2", "0.0.0.0"]

    func apply(key: String, value: String, dataDir: URL, secrets: [String: String], declared: [String]) throws -> String {
        if value.hasPrefix("tcp://") {
            // One endpoint, or a list of a service's instances.
            return value.split(separator: ",").map { endpoint -> String in
                guard let colon = endpoint.lastIndex(of: ":"), let port = Int(endpoint[endpoint.index(after: colon)...]) else { return String(endpoint) }
                let host = String(endpoint[endpoint.index(endpoint.startIndex, offsetBy: 6)..<colon])
                return "tcp://\(Self.hosts.contains(host) ? "127.0.0.1" : host):\(ports[port] ?? port)"
            }.joined(separator: ",")
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

extension DeployTests {
    /// Runs the compose file's three services as processes (the documented loopback
    /// substitutions), each started once its dependencies pass their healthcheck.
    /// `external` services (PostgreSQL) are not started: the test runs its own and gives their
    /// settings in `overrides` (values replacing a service's, e.g. the database URL).
    static func start(
        _ project: ComposeProject, external: Set<String> = [], overrides: [String: String] = [:]
    ) async throws -> RunningCompose {
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
            // The processes run as the test's own user: the image's switch from root to its user
            // (GATEHOUSE_RUN_AS) is the container's business, tested on a real engine (deploy-e2e).
            merged.removeValue(forKey: PrivilegeDrop.variable)
            for (key, value) in service["environment"] as? [String: Any] ?? [:] { merged[key] = "\(value)" }
            for (key, value) in overrides where merged[key] != nil { merged[key] = value }
            for (key, value) in merged where overrides[key] != nil {
                environment[key] = value
            }
            for (key, value) in merged where overrides[key] == nil {
                environment[key] = try substitution.apply(key: key, value: value, dataDir: dataDir, secrets: project.secretFiles, declared: declared)
            }
            environments[name] = environment
        }

        // Start in depends_on order, each once its dependencies pass their healthcheck.
        var healthy: Set<String> = external
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
