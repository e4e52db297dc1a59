import ArgumentParser
import Foundation
import LoadGenerator

extension Scenario: ExpressibleByArgument {}

@main
struct GatehouseLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gatehouse-load",
        abstract: "Load generator for the Gatehouse HTTP API.",
        discussion: """
            Scenarios: signup, signin, me, refresh, mixed, raw-get, provider, stream. Every response is checked (status and \
            body shape); a failed check counts as an error, never as throughput. Only loopback targets are \
            accepted unless --allow-remote is given. The stream scenario creates --streams anonymous users \
            (start the server with its anonymous sign-up limit off), holds one GET /v1/me/events stream \
            open for each, PATCHes their settings at --rate per second for --duration seconds, and reports \
            the delivery latency of the change events and whether any was lost or duplicated \
            (scripts/bench-stream). See docs/operators/load-testing.md.
            """
    )

    @Option(help: "Base URL of the gateway.")
    var url = "http://127.0.0.1:8080"

    @Option(help: "signup | signin | me | refresh | mixed | raw-get | provider | stream")
    var scenario: Scenario?

    @Option(help: "Virtual users (= connections), each with one request in flight.")
    var concurrency = 64

    @Option(help: "Measured seconds (at most \(Int(LoadConfiguration.maxDuration))).")
    var duration: Double = 10

    @Option(help: "Stop after this many measured requests (whichever bound comes first).")
    var requests: Int?

    @Option(help: "Seconds of load before measuring (not recorded).")
    var warmup: Double = 0

    @Option(help: "Users created during setup for signin/me/refresh/mixed (default: one per virtual user).")
    var setupUsers: Int?

    @Option(help: "Per-request timeout in seconds.")
    var timeout: Double = 10

    @Option(help: "Weights for the mixed scenario.")
    var mix = "me=70,refresh=20,signin=8,signup=2"

    @Option(help: "Seconds each virtual user waits after a 503 or 429 before its next request, like a client honouring Retry-After (0: retry at once).")
    var busyBackoff: Double = 0

    @Option(help: "Path for raw-get.")
    var path = "/healthz"

    @Option(help: "Bearer token sent by raw-get.")
    var bearer: String?

    @Option(help: "Tag for this run's emails (load-<run-id>-<n>@example.com); random by default.")
    var runID: String?

    @Flag(help: "Allow a target that is not loopback (only load-test servers you own).")
    var allowRemote = false

    @Option(help: "HTTP client: loop (virtual users on the client's own event-loop threads; plain http; the least CPU), nio (SwiftNIO connections; plain http) or async-http-client (also https). https targets always use async-http-client.")
    var engine: String = HTTPEngine.loop.rawValue

    @Option(help: "Event-loop threads of the loop engine (virtual users are spread over them).")
    var threads: Int = 1

    @Option(help: "stream: anonymous users, one open event stream each (at most \(StreamLoadConfiguration.maxStreams)).")
    var streams = 100

    @Option(help: "stream: PATCH /v1/me per second, spread over the users.")
    var rate: Double = 100

    @Option(help: "stream: seconds to wait after the last change for its events.")
    var drain: Double = 5

    @Option(help: "stream: seconds allowed for opening every stream.")
    var openTimeout: Double = 120

    @Option(help: "stream: streams connecting at once per thread.")
    var openWindow = 128

    @Option(help: "stream: the gateway's process id, to report its RSS before and after the streams open.")
    var gatewayPid: Int32?

    @Option(help: "provider: a P-256 private key (PEM) to sign the ID tokens with; made if the file does not exist. The server must trust its JWKS as google.com's (see --print-provider-jwks).")
    var providerKey: String?

    @Option(help: "provider: the tokens' aud (a client id in the server's GATEHOUSE_GOOGLE_CLIENT_IDS).")
    var providerAudience = "gatehouse-bench"

    @Flag(help: "Print the JWKS of --provider-key (made if absent) and exit: serve it as the server's GATEHOUSE_GOOGLE_JWKS_URL.")
    var printProviderJwks = false

    @Flag(help: "Print one JSON object instead of the table.")
    var json = false

    @Flag(help: "Exit with status 1 when any measured request failed.")
    var failOnError = false

    /// The `provider` scenario's key: read from `--provider-key`, made (0600) when absent.
    func providerKeyPEM() throws -> String? {
        guard let providerKey else { return nil }
        if let data = FileManager.default.contents(atPath: providerKey) { return String(decoding: data, as: UTF8.self) }
        let pem = ProviderSigner.newKeyPEM()
        guard FileManager.default.createFile(atPath: providerKey, contents: Data(pem.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw ValidationError("--provider-key: cannot write \(providerKey)")
        }
        return pem
    }

    func run() async throws {
        if printProviderJwks {
            guard let pem = try providerKeyPEM(), let signer = ProviderSigner(pem: pem) else {
                throw ValidationError("--print-provider-jwks needs --provider-key FILE holding a P-256 private key in PEM (or no file yet)")
            }
            print(signer.jwks)
            return
        }
        guard let scenario else { throw ValidationError("--scenario is required") }
        if scenario == .stream { return try await runStreams() }
        let configuration: LoadConfiguration
        do {
            var built = LoadConfiguration(
                url: url, scenario: scenario, concurrency: concurrency, duration: duration, maxRequests: requests,
                warmup: warmup, setupUsers: setupUsers, timeout: timeout, allowRemote: allowRemote, path: path,
                bearer: bearer, mix: try MixWeights(parsing: mix)
            )
            if let runID { built.runID = runID }
            built.busyBackoff = busyBackoff
            guard let chosen = HTTPEngine(rawValue: engine) else {
                throw LoadError.invalidConfiguration("--engine must be one of \(HTTPEngine.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            built.engine = chosen
            built.threads = threads
            built.providerKeyPEM = try providerKeyPEM()
            built.providerAudience = providerAudience
            if scenario == .provider, built.providerKeyPEM.flatMap(ProviderSigner.init(pem:)) == nil {
                throw LoadError.invalidConfiguration("the provider scenario needs --provider-key FILE (a P-256 private key in PEM)")
            }
            try built.validate()
            configuration = built
        } catch let error as LoadError {
            throw ValidationError(error.description)
        }

        try await report { progress in try await LoadRunner(configuration).run(progress: progress) }
    }

    /// Runs a scenario (its progress on standard error unless `--json`), prints its report, and
    /// exits 2 when it could not run, 1 when it found errors under `--fail-on-error`.
    func report<Result: LoadReport>(_ run: (@escaping @Sendable (String) -> Void) async throws -> Result) async throws {
        let quiet = json
        let result: Result
        do {
            result = try await run { message in
                if !quiet { FileHandle.standardError.write(Data("gatehouse-load: \(message)\n".utf8)) }
            }
        } catch let error as LoadError {
            FileHandle.standardError.write(Data("gatehouse-load: \(error.description)\n".utf8))
            throw ExitCode(2)
        }
        print(json ? result.json() : result.textReport())
        fflush(nil)
        if failOnError && result.hadErrors { throw ExitCode(1) }
    }

    /// The stream scenario (StreamLoadRunner).
    func runStreams() async throws {
        var configuration = StreamLoadConfiguration(url: url, streams: streams, rate: rate, duration: duration)
        configuration.drain = drain
        configuration.openTimeout = openTimeout
        configuration.openWindow = openWindow
        configuration.timeout = timeout
        configuration.concurrency = concurrency
        configuration.threads = threads
        configuration.gatewayPID = gatewayPid
        configuration.allowRemote = allowRemote
        do {
            try configuration.validate()
        } catch let error as LoadError {
            throw ValidationError(error.description)
        }
        try await report { progress in try await StreamLoadRunner(configuration).run(progress: progress) }
    }
}
