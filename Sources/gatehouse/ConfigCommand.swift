import ArgumentParser
import Foundation
import GatehouseApp

struct ConfigCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Print the configuration reference: every setting with its flag, default, roles and meaning.",
        subcommands: [ConfigReferenceCommand.self])
}

struct ConfigReferenceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reference",
        abstract: "Print the table of every setting (Markdown), or write it into a guide between its markers.",
        discussion: "docs/operators/configuration.md holds the full table and deploy/README.md the operator's; tests check both are current.")

    @Option(name: .long, help: "Replace the table between the markers of this Markdown file instead of printing it.")
    var write: String?

    func run() throws {
        guard let path = write else {
            print(ConfigReference.table(), terminator: "")
            return
        }
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw failed("error: cannot read \(path): \(error.localizedDescription)")
        }
        guard let updated = ConfigReference.splice(into: text) else {
            throw failed("error: \(path) lacks the markers `\(ConfigReference.startMarker(.full))` … `\(ConfigReference.endMarker(.full))` (or their -compose forms)")
        }
        do { try Data(updated.utf8).write(to: URL(fileURLWithPath: path)) } catch {
            throw failed("error: cannot write \(path): \(error.localizedDescription)")
        }
    }
}
