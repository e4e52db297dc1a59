import Foundation
import IdentityPorts
import Mustache

/// Operator templates (issue 19 §5, `GATEHOUSE_MAIL_TEMPLATES`): a folder of files named
/// `<kind>.<locale>.<part>.mustache`, where `kind` is `password_reset`, `verify_email`,
/// `change_email` or `email_changed`, `locale` a primary language subtag (`en`, `ja`, `zh`, ...)
/// and `part` `subject`, `text` or `html`.
///
/// - A file for a built-in locale replaces that part of the built-in template.
/// - A new locale needs at least `subject` and `text` for a kind; without `html`, its mails are
///   plain text.
/// - Anything else ending in `.mustache` (a typo in a name), a file over 64 KiB, text that is
///   not UTF-8 or a template that does not compile stops the service at start with the file's
///   name: a mistake is never discovered at the first mail.
extension MailTemplates {
    /// The largest template file, in bytes.
    public static let maxFileSize = 64 * 1024

    /// A template folder that cannot be used; `description` names the file and the fix.
    public struct LoadError: Error, CustomStringConvertible, Sendable {
        /// What is wrong, naming the file.
        public let description: String
    }

    /// The built-in templates with the files of `directory` laid over them; also how many files
    /// were read.
    public static func loading(directory: URL) throws -> (templates: MailTemplates, files: Int) {
        var templates = MailTemplates.builtIn
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        } catch {
            throw LoadError(description: "cannot read the mail template folder \(directory.path): \(error.localizedDescription)")
        }
        var added: [Kind: [String: [String: MustacheTemplate]]] = [:]
        var count = 0
        for name in names where name.hasSuffix(".mustache") {
            let parts = name.dropLast(".mustache".count).split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 3, let kind = Kind(rawValue: parts[0]), Self.isLocale(parts[1]),
                ["subject", "text", "html"].contains(parts[2])
            else {
                throw LoadError(description: """
                    mail template \(name): the name must be <kind>.<locale>.<part>.mustache with kind one of \
                    \(Kind.allCases.map(\.rawValue).joined(separator: ", ")), locale a language subtag (en, ja, zh, ...) \
                    and part subject, text or html
                    """)
            }
            let source = try Self.read(directory.appendingPathComponent(name), name: name)
            do {
                added[kind, default: [:]][parts[1], default: [:]][parts[2]] = try MustacheTemplate(string: source)
            } catch {
                throw LoadError(description: "mail template \(name) does not compile: \(error)")
            }
            count += 1
        }
        for (kind, locales) in added {
            for (locale, parts) in locales {
                if var set = templates.sets[kind]?[locale] {
                    if let subject = parts["subject"] { set.subject = subject }
                    if let text = parts["text"] { set.text = text }
                    if let html = parts["html"] { set.html = html }
                    templates.sets[kind]?[locale] = set
                } else {
                    guard let subject = parts["subject"], let text = parts["text"] else {
                        throw LoadError(description: """
                            mail templates for \(kind.rawValue) in \(locale): a locale that is not built in needs both \
                            \(kind.rawValue).\(locale).subject.mustache and \(kind.rawValue).\(locale).text.mustache
                            """)
                    }
                    templates.sets[kind, default: [:]][locale] = Set(subject: subject, text: text, html: parts["html"])
                }
            }
        }
        return (templates, count)
    }

    /// A primary language subtag: 2 to 8 lowercase ASCII letters.
    static func isLocale(_ tag: String) -> Bool {
        (2...8).contains(tag.utf8.count) && tag.utf8.allSatisfy { $0 >= 0x61 && $0 <= 0x7A }
    }

    /// The file's text: a regular file of at most `maxFileSize` bytes, UTF-8.
    static func read(_ url: URL, name: String) throws -> String {
        let attributes = try? FileManager.default.attributesOfItem(atPath: url.path)
        guard attributes?[.type] as? FileAttributeType == .typeRegular else {
            throw LoadError(description: "mail template \(name) is not a regular file")
        }
        guard let size = attributes?[.size] as? Int, size <= maxFileSize else {
            throw LoadError(description: "mail template \(name) is larger than \(maxFileSize / 1024) KiB")
        }
        guard let data = FileManager.default.contents(atPath: url.path), let text = String(data: data, encoding: .utf8) else {
            throw LoadError(description: "mail template \(name) cannot be read as UTF-8 text")
        }
        return text
    }
}
