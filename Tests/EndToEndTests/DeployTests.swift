import Foundation
import GatehouseApp
import GatehouseTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

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
        // Started as root, every command switches to the user gatehouse (uid 10001) at once, after
        // reading the secrets compose bind-mounts as the operator's 0600 files (issue 35).
        #expect(dockerfile.contains("ENV GATEHOUSE_RUN_AS=10001:10001"))
        #expect(!dockerfile.contains("VOLUME"), "a VOLUME gives the gateway an anonymous volume it never uses")
        #expect(dockerfile.contains("chmod 0700 /data"))

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

        // Every variable either compose file interpolates is in .env.example, and every one listed
        // there is used; every GATEHOUSE_* key is in the deploy README.
        let compose = try ["docker-compose.yml", "docker-compose.postgres.yml"].map {
            try String(contentsOf: BuiltProducts.packageRoot.appendingPathComponent("deploy/\($0)"), encoding: .utf8)
        }.joined(separator: "\n")
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
