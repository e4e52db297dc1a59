import Foundation
import GatehouseTestSupport
import IdentityService
import Mail
import Testing

/// Issue 19 §5: the built-in templates of every kind, the choice of locale, and operator files.
@Suite("Mail templates")
struct MailTemplatesTests {
    let date = Date(timeIntervalSince1970: 1_800_000_000)

    func folder(_ files: [String: String]) throws -> TemporaryDirectory {
        let dir = try TemporaryDirectory()
        for (name, text) in files { try Data(text.utf8).write(to: dir.url.appendingPathComponent(name)) }
        return dir
    }

    @Test("every kind has English and Japanese built in, with the code, the link and the expiry")
    func builtIn() throws {
        let composer = MailComposer(appName: "Sakura", from: "Sakura <auth@sakura.example>", linkBase: "https://sakura.example/actions")
        for kind in MailTemplates.Kind.allCases {
            for locale in ["en", "ja"] {
                let mail = composer.message(
                    kind, to: "ada@example.com", code: "CODE123", ttl: 7200, preferences: locale, date: date,
                    extra: ["oldEmail": "old@example.com", "newEmail": "new@example.com"])
                #expect(mail.kind == kind.rawValue && mail.problem == nil)
                #expect(mail.subject.contains("Sakura"), "\(kind) \(locale)")
                #expect(mail.text.contains("CODE123"))
                #expect(mail.text.contains("https://sakura.example/actions?mode=\(kind.linkMode)&code=CODE123&lang=\(locale)"))
                #expect(try #require(mail.html).contains("lang=\"\(locale)\""))
                #expect(!mail.text.contains("{{"))
            }
        }
        let changed = composer.message(
            .emailChanged, to: "old@example.com", code: "C", ttl: 7 * 86_400, preferences: "en", date: date,
            extra: ["oldEmail": "old@example.com", "newEmail": "new@example.com"])
        #expect(changed.text.contains("7 days") && changed.text.contains("new@example.com"))
    }

    @Test("the locale is the first of the preference list that has templates, else en")
    func locales() {
        let t = MailTemplates.builtIn
        #expect(t.locale("ja") == "ja" && t.locale("JA-jp") == "ja" && t.locale("fr,ja") == "ja")
        #expect(t.locale("en,ja") == "en" && t.locale("fr") == "en" && t.locale("") == "en")
        #expect(t.locales == ["en", "ja"])
    }

    @Test("operator files replace a built-in part and add a locale; a locale without html mails text only")
    func overrides() throws {
        let dir = try folder([
            "password_reset.en.subject.mustache": "{{{appName}}}: your reset code",
            "password_reset.zh.subject.mustache": "重置您的 {{{appName}}} 密码",
            "password_reset.zh.text.mustache": "您的重置代码: {{{code}}}\n{{#link}}{{{link}}}{{/link}}\n{{{linkBase}}}/help\n",
            "README.txt": "not a template: ignored",
        ])
        defer { dir.remove() }
        let (templates, files) = try MailTemplates.loading(directory: dir.url)
        #expect(files == 3 && templates.locales == ["en", "ja", "zh"])
        let composer = MailComposer(templates: templates, appName: "Sakura", linkBase: "https://s.example/a")
        let en = composer.message(.passwordReset, to: "a@example.com", code: "K1", ttl: 3600, preferences: "en", date: date)
        #expect(en.subject == "Sakura: your reset code")
        #expect(en.text.contains("K1") && en.html != nil)  // the built-in body stays
        let zh = composer.message(.passwordReset, to: "a@example.com", code: "K2", ttl: 3600, preferences: "zh-TW,ja", date: date)
        #expect(zh.subject == "重置您的 Sakura 密码" && zh.text.contains("您的重置代码: K2") && zh.html == nil)
        #expect(zh.text.contains("lang=zh") && zh.text.contains("https://s.example/a/help"))
        #expect(zh.problem == nil)
        // Other kinds have no zh: the next preference (ja) wins.
        let verify = composer.message(.verifyEmail, to: "a@example.com", code: "K3", ttl: 3600, preferences: "zh-TW,ja", date: date)
        #expect(verify.subject == "Sakura メールアドレスの確認")
    }

    @Test("a wrong name, a template that does not compile, a new locale without text, a huge file: refused naming the file")
    func refused() throws {
        func refusal(_ files: [String: String]) throws -> String {
            let dir = try folder(files)
            defer { dir.remove() }
            do {
                _ = try MailTemplates.loading(directory: dir.url)
                return ""
            } catch let error as MailTemplates.LoadError {
                return error.description
            }
        }
        #expect(try refusal(["pasword_reset.en.subject.mustache": "x"]).contains("pasword_reset.en.subject.mustache"))
        #expect(try refusal(["password_reset.en.body.mustache": "x"]).contains("part subject, text or html"))
        #expect(try refusal(["password_reset.EN.text.mustache": "x"]).contains("locale"))
        #expect(try refusal(["verify_email.en.text.mustache": "{{#link}} unclosed"]).contains("does not compile"))
        #expect(try refusal(["verify_email.fr.subject.mustache": "x"]).contains("verify_email.fr.text.mustache"))
        #expect(try refusal(["verify_email.en.html.mustache": String(repeating: "x", count: 65 * 1024)]).contains("64 KiB"))
        #expect(try refusal([:]).isEmpty)
    }
}
