import ArgumentParser
import Foundation
import GatehouseApp

struct HashBenchmarkCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hash-benchmark",
        abstract: "Measure Argon2id with the configured parameters: one thread, then every hashing worker at once.",
        discussion: """
            The second figure is the ceiling for sign-ups and sign-ins on this machine. Reads \
            GATEHOUSE_ARGON2_MEMORY_KIB, _ITERATIONS, _PARALLELISM and GATEHOUSE_HASH_WORKERS like the \
            identity service. Runs for about twice --seconds.
            """)
    @Option(help: "Seconds for each of the two phases.") var seconds: Double = 5
    @Flag(help: "Print one JSON object.") var json = false
    @Argument(parsing: .allUnrecognized, help: "Configuration flags, e.g. --argon2-memory-kib 19456.") var options: [String] = []

    func run() throws {
        guard seconds > 0, seconds <= 600 else { throw ValidationError("--seconds must be in (0, 600]") }
        let settings: IdentityRoleSettings
        do {
            // Only the hashing settings are used: inproc links, which need no keys.
            settings = try IdentityRoleSettings(
                config: try Config(arguments: options), rpcBind: "inproc://identity", eventsBind: "inproc://identity-events", tokenURL: "inproc://token")
        } catch let error as ConfigError {
            throw ValidationError(error.message)
        }
        let benchmark = HashBenchmark(settings: settings, seconds: seconds)
        do {
            let result = try benchmark.run()
            print(json ? result.json : result.text)
        } catch {
            throw fail("hash-benchmark", "\(error)")
        }
    }
}
