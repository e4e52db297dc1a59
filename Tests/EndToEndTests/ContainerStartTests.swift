import Foundation
import GatehouseTestSupport
import Testing


/// What a container start needs of the binary (issue 35), on real processes: giving up root
/// after reading secrets the unprivileged user could not open (`GATEHOUSE_RUN_AS`), and a slow
/// DNS answer for a stopped peer's name holding up only the connection to that peer. Both need
/// root (the switch of user; a private mount namespace with its own resolv.conf), as CI has;
/// elsewhere they are skipped. deploy-e2e checks the same on a real Docker engine.
@Suite("Container start", .enabled(if: getuid() == 0, "needs root, as CI runs"))
struct ContainerStartTests {
    /// A folder others may enter (the user switched to must reach its data folder inside).
    static func folder(_ name: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("gh-\(name)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        return url
    }

    /// The owner, group and permission bits of `path` itself (a link is not followed). Read
    /// through FileManager: libc's `struct stat` fields need an import of whichever module first
    /// included <sys/stat.h> (swiftlang/swift#85427), which changes with the build graph.
    static func owner(_ path: String) -> (uid: uid_t, gid: gid_t, mode: mode_t) {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path) else { return (0, 0, 0) }
        let uid = (attributes[.ownerAccountID] as? NSNumber)?.uint32Value ?? 0
        let gid = (attributes[.groupOwnerAccountID] as? NSNumber)?.uint32Value ?? 0
        let mode = (attributes[.posixPermissions] as? NSNumber)?.uint32Value ?? 0
        return (uid_t(uid), gid_t(gid), mode_t(mode & 0o7777))
    }

    /// The real, effective, saved and file-system user ids of `pid` (`/proc/PID/status`).
    static func uids(_ pid: Int32) -> [String] {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("Uid:") } ?? ""
        return line.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst().map(String.init)
    }

    @Test("GATEHOUSE_RUN_AS: the token role reads a root-only key-encryption key, takes over its data folder, and runs as the user")
    func switchesUser() async throws {
        let root = try Self.folder("drop")
        defer { try? FileManager.default.removeItem(at: root) }
        // The secret as compose bind-mounts it from an operator's folder: 0600, not the user's.
        let secrets = root.appendingPathComponent("secrets")
        try FileManager.default.createDirectory(at: secrets, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let keyFile = secrets.appendingPathComponent("key-encryption.key")
        try Data(repeating: 7, count: 32).base64EncodedString().write(to: keyFile, atomically: false, encoding: .utf8)
        chmod(keyFile.path, 0o600)
        // A data folder as a restore copied it in, as root, readable by others.
        let data = root.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        try Data("old".utf8).write(to: data.appendingPathComponent("restored-by-root"))

        let stack = Stack()
        var environment = stack.environment
        environment.removeValue(forKey: "GATEHOUSE_TEST_CLOCK_FILE")  // root's 0600 file
        environment["GATEHOUSE_DATA_DIR"] = data.path
        environment["GATEHOUSE_KEY_ENCRYPTION_KEY_FILE"] = keyFile.path
        environment["GATEHOUSE_RUN_AS"] = "65534:65534"
        let log = root.appendingPathComponent("token.log")
        let token = try launchProcess(try gatehouseBinary(), ["token"], environment: environment, log: log)
        defer { token.terminate() }
        var probe = stack.environment
        probe["GATEHOUSE_ROLE"] = "token"
        do { try await waitHealthy([], environment: probe) } catch {
            throw StackError("\(error); log: \((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
        }

        #expect(Self.uids(token.processIdentifier) == ["65534", "65534", "65534", "65534"])
        let database = Self.owner(data.appendingPathComponent("token.sqlite").path)
        #expect(database.uid == 65534 && database.gid == 65534 && database.mode == 0o600)
        let restored = Self.owner(data.appendingPathComponent("restored-by-root").path)
        #expect(restored.uid == 65534 && restored.gid == 65534)
        #expect(Self.owner(data.path) == (65534, 65534, 0o700))
        // The operator's file is left as it was.
        #expect(Self.owner(keyFile.path) == (0, 0, 0o600))
    }

    @Test("GATEHOUSE_RUN_AS refuses root and malformed values rather than run as root")
    func refusesRoot() async throws {
        for value in ["0:0", "10001", "gatehouse:gatehouse", "10001:0"] {
            let result = try await runProcess(try gatehouseBinary(), ["keys", "--help"], environment: ["GATEHOUSE_RUN_AS": value, "PATH": "/usr/bin:/bin"])
            #expect(result.status == 70, "\(value): \(result.stdout) \(result.stderr)")
            #expect(result.stderr.contains("GATEHOUSE_RUN_AS must be UID:GID"), "\(value): \(result.stderr)")
        }
    }

    /// A DNS server on `address`:53 that never answers and writes each query's name to `log`.
    static let silentDNS = """
        import socket, sys
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((sys.argv[1], 53))
        log = open(sys.argv[2], "a", buffering=1)
        log.write("listening\\n")
        while True:
            data, _ = s.recvfrom(4096)
            labels, i = [], 12
            while i < len(data) and data[i] != 0:
                labels.append(data[i + 1:i + 1 + data[i]].decode(errors="replace")); i += 1 + data[i]
            log.write(".".join(labels) + "\\n")
        """

    @Test("a peer whose name takes seconds to resolve holds up only its own link: the token service keeps answering")
    func slowLookupStaysWithItsPeer() async throws {
        let unshare = try which("unshare"), python = try which("python3")
        let root = try Self.folder("dns")
        defer { try? FileManager.default.removeItem(at: root) }
        let address = "127.\(Int.random(in: 1...254)).\(Int.random(in: 1...254)).\(Int.random(in: 2...254))"
        let script = root.appendingPathComponent("dns.py"), queries = root.appendingPathComponent("queries.log")
        try Self.silentDNS.write(to: script, atomically: true, encoding: .utf8)
        let dns = try launchProcess(python, [script.path, address, queries.path])
        defer { dns.terminate() }
        try await waitUntil("the silent DNS server", timeout: .seconds(20)) {
            ((try? String(contentsOf: queries, encoding: .utf8)) ?? "").contains("listening")
        }
        // Every lookup the token process makes waits 4 s for an answer that never comes.
        let resolv = root.appendingPathComponent("resolv.conf")
        try "nameserver \(address)\noptions timeout:4 attempts:1\n".write(to: resolv, atomically: true, encoding: .utf8)

        let stack = Stack()
        defer { stack.stopAll() }
        var environment = stack.environment
        let peer = "gatehouse-stopped-peer-\(UInt32.random(in: 0...UInt32.max)).test"
        environment["GATEHOUSE_IDENTITY_URL"] = "tcp://\(peer):7001"
        let log = root.appendingPathComponent("token.log")
        // resolv.conf replaced for the token process alone, in a private mount namespace.
        let token = try launchProcess(
            unshare, ["--mount", "--propagation", "private", "--", "/bin/sh", "-c", #"mount --bind "$1" /etc/resolv.conf && exec "$2" token"#, "sh", resolv.path, try gatehouseBinary().path],
            environment: environment, log: log)
        defer { token.terminate() }
        var probe = stack.environment
        probe["GATEHOUSE_ROLE"] = "token"
        do { try await waitHealthy([], environment: probe) } catch {
            throw StackError("\(error); log: \((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
        }
        try await waitUntil("the token service's lookup of \(peer)", timeout: .seconds(20)) {
            ((try? String(contentsOf: queries, encoding: .utf8)) ?? "").contains(peer)
        }
        // While lookups of the peer hang (one after another, each 4 s), the service's own socket
        // answers every probe within the healthcheck's 1 s: with one ZeroMQ context for every
        // socket, the lookup held its I/O thread and these failed.
        let start = ContinuousClock.now
        var probes = 0
        while ContinuousClock.now - start < .seconds(6) {
            let result = try await healthcheck([], environment: probe)
            #expect(result.status == 0, "probe \(probes) at \(ContinuousClock.now - start): \(result.stderr)")
            probes += 1
            try await Task.sleep(for: .milliseconds(250))
        }
        let asked = ((try? String(contentsOf: queries, encoding: .utf8)) ?? "").split(separator: "\n").filter { $0.hasPrefix(peer) }.count
        #expect(asked >= 2, "the peer's name was looked up \(asked) times: the probes did not overlap a hanging lookup")
        #expect(token.isRunning)
    }
}
