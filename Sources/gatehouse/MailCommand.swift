import ArgumentParser
import Foundation
import GatehouseApp

/// `gatehouse mail list|show`: the local mailbox (`<GATEHOUSE_DATA_DIR>/mailbox`), where the
/// identity service delivers mail when no SMTP relay is configured.
struct MailCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mail",
        abstract: "Print the local mailbox (<GATEHOUSE_DATA_DIR>/mailbox), where mail goes without GATEHOUSE_SMTP_HOST.",
        subcommands: [MailList.self, MailShow.self]
    )
}

/// The mailbox of the configured data folder.
func mailbox(_ options: [String]) throws -> MailboxReader {
    do {
        let config = try Config(arguments: options)
        return MailboxReader(dataDir: try config.required(ConfigTable.dataDir))
    } catch let error as ConfigError {
        throw ValidationError(error.message)
    }
}

struct MailList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "One line per mail, oldest first: number, file, date, kind, recipient, subject.")
    @Argument(parsing: .allUnrecognized, help: "Configuration flags, e.g. --data-dir ./.gatehouse.") var options: [String] = []

    func run() throws {
        let box = try mailbox(options)
        let files = try box.files()
        if files.isEmpty {
            print("no mail in \(box.folder.path)")
            return
        }
        for (index, name) in files.enumerated() {
            let mail = try box.read(name)
            let h = mail.headers
            print([String(index + 1), name, h["date"] ?? "", h["x-gatehouse-kind"] ?? "", h["to"] ?? "", h["subject"] ?? ""].joined(separator: "\t"))
        }
    }
}

struct MailShow: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Print one mail: its headers and decoded bodies (or --raw, the file as is).",
        discussion: "MAIL is a number from `gatehouse mail list`, `last` (the newest), a file name or a Message-ID.")
    @Argument(help: "A number from `mail list`, `last`, a file name or a Message-ID.") var mail: String
    @Flag(help: "Print the file as written (MIME, base64 bodies).") var raw = false
    @Argument(parsing: .allUnrecognized, help: "Configuration flags, e.g. --data-dir ./.gatehouse.") var options: [String] = []

    func run() throws {
        let box = try mailbox(options)
        guard let found = try box.mail(mail) else {
            throw failed("error: no mail \(mail) in \(box.folder.path); see `gatehouse mail list`")
        }
        if raw {
            print(found.raw, terminator: "")
            return
        }
        for name in ["message-id", "date", "from", "to", "subject", "x-gatehouse-kind"] {
            if let value = found.headers[name] { print("\(Self.title(name)): \(value)") }
        }
        print("")
        print(found.text)
        if let html = found.html {
            print("\n--- HTML ---")
            print(html)
        }
    }

    static func title(_ name: String) -> String {
        switch name {
        case "message-id": return "Message-ID"
        case "x-gatehouse-kind": return "Kind"
        default: return name.prefix(1).uppercased() + name.dropFirst()
        }
    }
}
