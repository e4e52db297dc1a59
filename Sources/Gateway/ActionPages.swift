import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Mustache
import NIOCore

/// The pages behind the links in mails (`GET`/`POST /actions`, issue 19 §6): plain HTML forms
/// without JavaScript, in English or Japanese, rendered from one swift-mustache template.
///
/// A `GET` only shows a form that posts the code back (mail scanners open links); the `POST`
/// does the action. Every page carries the same strict headers (`headers(_:)`): a content
/// security policy that allows nothing but the one inline style (by its hash) and form posts to
/// this origin, no framing, no referrer (the code is in the URL), no sniffing, no caching.
enum ActionPages {
    /// The action of a link: Firebase's mode names, so apps moving over keep their handlers.
    enum Mode: String, CaseIterable, Sendable {
        /// A new password (`identity.confirmPasswordReset`).
        case resetPassword
        /// Verify the address (`identity.confirmEmailVerification`).
        case verifyEmail
        /// Confirm a change to this new address (`identity.confirmEmailChange`).
        case verifyAndChangeEmail
        /// Undo a change, from the old address (`identity.revertEmailChange`).
        case recoverEmail
    }

    /// The languages of the pages.
    enum Language: String, CaseIterable, Sendable {
        case en, ja
    }

    /// What a page shows.
    struct Page: Sendable {
        var status: HTTPResponse.Status
        var title: String
        /// Paragraphs of text.
        var paragraphs: [String] = []
        /// An error shown first, with `role="alert"`.
        var alert: String?
        /// The reasons of the alert, as a list.
        var reasons: [String] = []
        /// The form posting the code back, if the page has one.
        var form: Form?
        /// `Retry-After` seconds (429, 503).
        var retryAfter: String?
    }

    /// A form that posts `mode`, `code` and `lang` back, with password fields for `resetPassword`.
    struct Form: Sendable {
        var mode: Mode
        var code: String
        var submit: String
    }

    /// The one inline style; its hash is in the content security policy.
    static let style =
        "body{font-family:system-ui,sans-serif;line-height:1.5;margin:0;padding:1rem;color:#1b1b1b;background:#fff}"
        + "main{max-width:30rem;margin:2rem auto}.app{color:#555;margin:0}h1{font-size:1.5rem}"
        + "label{display:block;font-weight:600}input{font:inherit;width:100%;box-sizing:border-box;padding:.5rem;margin-bottom:.75rem}"
        + "button{font:inherit;padding:.5rem 1.25rem;cursor:pointer}"
        + ".alert{border-left:4px solid #b00020;background:#fdecea;padding:.25rem 1rem;margin-bottom:1rem}"

    /// `Content-Security-Policy` of every page.
    static let contentSecurityPolicy: String = {
        let digest = Data(SHA256.hash(data: Data(style.utf8))).base64EncodedString()
        return "default-src 'none'; style-src 'sha256-\(digest)'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    }()

    /// The page template (escaping `{{…}}`; only the fixed style is inserted raw).
    static let template: MustacheTemplate = {
        let source = """
            <!doctype html>
            <html lang="{{lang}}">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <meta name="robots" content="noindex">
            <title>{{title}} – {{appName}}</title>
            <style>\(style)</style>
            </head>
            <body>
            <main>
            <p class="app">{{appName}}</p>
            <h1>{{title}}</h1>
            {{#hasAlert}}
            <div class="alert" role="alert" id="problem">
            <p>{{alert}}</p>
            {{#hasReasons}}<ul>{{#reasons}}<li>{{.}}</li>{{/reasons}}</ul>{{/hasReasons}}
            </div>
            {{/hasAlert}}
            {{#paragraphs}}<p>{{.}}</p>
            {{/paragraphs}}
            {{#hasForm}}
            <form method="post" action="actions">
            <input type="hidden" name="mode" value="{{mode}}">
            <input type="hidden" name="code" value="{{code}}">
            <input type="hidden" name="lang" value="{{lang}}">
            {{#passwords}}
            <label for="password">{{passwordLabel}}</label>
            <input type="password" id="password" name="password" autocomplete="new-password" required maxlength="1024"{{#hasAlert}} aria-invalid="true" aria-describedby="problem"{{/hasAlert}}>
            <label for="passwordConfirm">{{confirmLabel}}</label>
            <input type="password" id="passwordConfirm" name="passwordConfirm" autocomplete="new-password" required maxlength="1024">
            {{/passwords}}
            <button type="submit">{{submit}}</button>
            </form>
            {{/hasForm}}
            </main>
            </body>
            </html>

            """
        // swiftlint:disable:next force_try
        return try! MustacheTemplate(string: source)
    }()

    /// The headers of every page (`retryAfter` added for 429 and 503).
    static func headers(retryAfter: String? = nil) -> HTTPFields {
        var fields = HTTPFields()
        fields[.contentType] = "text/html; charset=utf-8"
        fields[.contentSecurityPolicy] = contentSecurityPolicy
        fields[.xFrameOptions] = "DENY"
        fields[.referrerPolicy] = "no-referrer"
        fields[.xContentTypeOptions] = "nosniff"
        fields[.cacheControl] = "no-store"
        if let retryAfter { fields[.retryAfter] = retryAfter }
        return fields
    }

    /// `page` as HTML in `language`, under `appName`.
    static func html(_ page: Page, _ language: Language, appName: String) -> String {
        let text = ActionText.of(language)
        var values: [String: Any] = [
            "lang": language.rawValue, "appName": appName, "title": page.title, "paragraphs": page.paragraphs,
            "hasAlert": page.alert != nil, "alert": page.alert ?? "", "hasReasons": !page.reasons.isEmpty, "reasons": page.reasons,
            "hasForm": page.form != nil, "passwordLabel": text.newPassword, "confirmLabel": text.confirmPassword,
        ]
        if let form = page.form {
            values["mode"] = form.mode.rawValue
            values["code"] = form.code
            values["submit"] = form.submit
            values["passwords"] = form.mode == .resetPassword
        }
        return template.render(values)
    }

    /// `page` as a response with the page headers.
    static func response(_ page: Page, _ language: Language, appName: String) -> Response {
        Response(
            status: page.status, headers: headers(retryAfter: page.retryAfter),
            body: .init(byteBuffer: ByteBuffer(string: html(page, language, appName: appName))))
    }

    /// The page's language: `lang` (the link's, or the form's) when it is one of ours, else the
    /// first of ours in `Accept-Language`, else English.
    static func language(_ lang: String?, acceptLanguage: String?) -> Language {
        if let lang, let primary = lang.split(separator: "-").first, let chosen = Language(rawValue: primary.lowercased()) {
            return chosen
        }
        let preferences = GatewayRoutes.mailLocale(acceptLanguage).split(separator: ",")
        return preferences.lazy.compactMap { Language(rawValue: String($0)) }.first ?? .en
    }

    /// Whether `code` can be a code from a mail: 1 to 128 base64url characters. Anything else is
    /// refused without asking the identity service, and never shown.
    static func isWellFormed(_ code: String) -> Bool {
        (1...128).contains(code.utf8.count)
            && code.utf8.allSatisfy { b in
                (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2D || b == 0x5F
            }
    }
}

extension HTTPField.Name {
    static let xFrameOptions = Self("X-Frame-Options")!
    static let referrerPolicy = Self("Referrer-Policy")!
}
