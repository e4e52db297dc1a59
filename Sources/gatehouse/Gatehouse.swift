import ArgumentParser

@main
struct Gatehouse: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gatehouse",
        abstract: "A self-hosted authentication backend.",
        subcommands: [Serve.self]
    )
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run identity, token and gateway roles in one process.")
    func run() async throws {
        print("gatehouse serve: not yet — the gateway lands with issue 5.")
    }
}
