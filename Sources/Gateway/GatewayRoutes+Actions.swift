import Foundation
import GatehouseContracts
import GatehouseSupport
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// The action pages (issue 19 §6): where the links in mails land by default
/// (`<GATEHOUSE_PUBLIC_URL>/actions?mode=…&code=…&lang=…`). `GET /actions` only renders a form
/// (mail scanners prefetch links); `POST /actions` (a form, at most 4 KiB) does the action through
/// the same contract calls and limits as the JSON confirm routes, and answers a page in every
/// case, never a problem document: 200 done, 400 a refused or incomplete link, 422 a password to
/// fix (the form again, the reasons in words), 429 and 503 with `Retry-After`.
///
/// The code appears only in the form's hidden field: never in another part of a page, never in
/// a log line (the access log has the path only).
extension GatewayRoutes {
    /// The largest form `POST /actions` reads.
    static let actionFormLimit = 4096

    /// `GET /actions?mode=&code=&lang=`: the form of the mode, or a 400 page for an unknown mode
    /// or a missing or malformed code. Changes nothing.
    @Sendable func actionPage(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let query = request.uri.queryParameters
        let language = ActionPages.language(query["lang"].map(String.init), acceptLanguage: request.headers[.acceptLanguage])
        guard let mode = query["mode"].flatMap({ ActionPages.Mode(rawValue: String($0)) }), let code = query["code"].map(String.init),
            ActionPages.isWellFormed(code)
        else {
            return page(Self.incompletePage(language), language)
        }
        return page(Self.promptPage(mode, code: code, language), language)
    }

    /// `POST /actions` (`application/x-www-form-urlencoded`: mode, code, lang, and for
    /// `resetPassword` password and passwordConfirm): does the action and answers its page.
    @Sendable func submitAction(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let client = identifyClient(request, context)
        var language = ActionPages.language(nil, acceptLanguage: request.headers[.acceptLanguage])
        var action: (mode: ActionPages.Mode, code: String)?
        do {
            let form = try await Self.readActionForm(request)
            language = ActionPages.language(form["lang"], acceptLanguage: request.headers[.acceptLanguage])
            // Limited like the JSON confirm routes (a code is a credential); the small form is
            // read first so that even this page is in the link's language.
            try admit(.signIn, client.address)
            guard let mode = form["mode"].flatMap(ActionPages.Mode.init(rawValue:)), let code = form["code"], ActionPages.isWellFormed(code)
            else {
                return page(Self.incompletePage(language), language)
            }
            action = (mode, code)
            let text = ActionText.of(language)
            let request = EmailCodeRequest(code: code, locale: language.rawValue, client: client.info)
            let reply: EmailCodeResponse
            switch mode {
            case .resetPassword:
                let password = form["password"] ?? "", confirmation = form["passwordConfirm"] ?? ""
                var retry = Self.promptPage(mode, code: code, language)
                retry.status = .unprocessableContent
                if password.isEmpty { retry.alert = text.emptyPassword }
                else if password != confirmation { retry.alert = text.mismatch }
                else if password.utf8.count > 1024 { retry.alert = text.tooLong }
                if retry.alert != nil { return page(retry, language) }
                return try await withPasswordPlace {
                    let confirm = ConfirmPasswordResetRequest(code: code, password: password, client: client.info)
                    let reply = try await call(services.identity, IdentityAPI.confirmPasswordReset, confirm)
                    revocations.insert(reply.revokedSessionIDs, now: clock.now)
                    return page(Self.donePage(mode, email: nil, language), language)
                }
            case .verifyEmail: reply = try await call(services.identity, IdentityAPI.confirmEmailVerification, request)
            case .verifyAndChangeEmail: reply = try await call(services.identity, IdentityAPI.confirmEmailChange, request)
            case .recoverEmail: reply = try await call(services.identity, IdentityAPI.revertEmailChange, request)
            }
            revocations.insert(reply.revokedSessionIDs, now: clock.now)
            return page(Self.donePage(mode, email: reply.user.email, language), language)
        } catch {
            let problem = Self.problem(error)
            if problem.status.code >= 500, problem.status != .serviceUnavailable {
                // The error's text, never the form (it holds the code and maybe a password).
                let cause = (error as? RPCError).map(\.description) ?? String(describing: type(of: error))
                context.logger.error("action page failed", metadata: ["code": .string(problem.code), "error": .string(cause)])
            }
            return page(Self.failurePage(problem, action: action, language), language)
        }
    }

    /// `page` in `language`, with this gateway's app name and the page headers.
    func page(_ page: ActionPages.Page, _ language: ActionPages.Language) -> Response {
        ActionPages.response(page, language, appName: configuration.appName)
    }

    // MARK: Pages

    static func promptPage(_ mode: ActionPages.Mode, code: String, _ language: ActionPages.Language) -> ActionPages.Page {
        let prompt = ActionText.of(language).prompt[mode]!
        return ActionPages.Page(
            status: .ok, title: prompt.title, paragraphs: prompt.paragraphs, form: ActionPages.Form(mode: mode, code: code, submit: prompt.submit))
    }

    static func donePage(_ mode: ActionPages.Mode, email: String?, _ language: ActionPages.Language) -> ActionPages.Page {
        let done = ActionText.of(language).done[mode]!
        let paragraphs = done.paragraphs.map { $0.replacingOccurrences(of: "{email}", with: email ?? "") }
        return ActionPages.Page(status: .ok, title: done.title, paragraphs: paragraphs)
    }

    static func incompletePage(_ language: ActionPages.Language) -> ActionPages.Page {
        let text = ActionText.of(language)
        return ActionPages.Page(status: .badRequest, title: text.incompleteTitle, alert: text.incomplete)
    }

    /// The page for a failed `POST`: the problem's status (and `Retry-After`), its words in
    /// `language`; the form again when the password is to blame.
    static func failurePage(
        _ problem: GatewayError, action: (mode: ActionPages.Mode, code: String)?, _ language: ActionPages.Language
    ) -> ActionPages.Page {
        let text = ActionText.of(language)
        var page = ActionPages.Page(status: problem.status, title: text.failedTitle)
        switch ErrorCode(rawValue: problem.code) {
        case .invalidResetCode, .invalidVerificationCode, .invalidEmailChangeCode:
            page.title = text.codeRefusedTitle
            page.paragraphs = [action.flatMap { text.codeRefused[$0.mode] } ?? text.incomplete]
        case .weakPassword, .invalidArgument:
            guard let action else {
                page.paragraphs = [text.formUnreadable]
                break
            }
            page = promptPage(action.mode, code: action.code, language)
            page.status = problem.status
            page.alert = problem.code == ErrorCode.weakPassword.rawValue ? text.weakPassword : text.tooLong
            page.reasons = (problem.reasons ?? []).compactMap { text.reasons[$0] }
        case .rateLimited, .tooManyAttempts:
            page.title = text.rateLimitedTitle
            page.paragraphs = [text.rateLimited.replacingOccurrences(of: "{seconds}", with: problem.headers[.retryAfter] ?? "1")]
        case .emailExists: page.paragraphs = [text.emailTaken]
        case .userDisabled: page.paragraphs = [text.disabled]
        case .malformedRequest, .payloadTooLarge, .unsupportedMediaType:
            page.paragraphs = [text.formUnreadable]
        default:
            if problem.status == .serviceUnavailable {
                page.title = text.unavailableTitle
                page.paragraphs = [text.unavailable]
            } else {
                page.paragraphs = [text.failed]
            }
        }
        page.retryAfter = problem.headers[.retryAfter]
        if page.alert == nil, !page.paragraphs.isEmpty {
            page.alert = page.paragraphs.removeFirst()  // announced (role="alert")
        }
        return page
    }

    /// Any error as the problem the JSON routes would answer (the table's status and headers).
    static func problem(_ error: any Error) -> GatewayError {
        switch error {
        case let e as GatewayError: e
        case let e as RPCError: GatewayError(e)
        case is NIOTooManyBytesError: .payloadTooLarge(actionFormLimit)
        case let e as HTTPLayerError: e.problem
        case is CancellationError: .serviceUnavailable
        default: .internal
        }
    }

    // MARK: The form

    /// The fields of an `application/x-www-form-urlencoded` body of at most `actionFormLimit`
    /// bytes: 415 another type, 413 a larger body, 400 bad percent-encoding or a repeated field.
    static func readActionForm(_ request: Request) async throws -> [String: String] {
        guard let type = request.headers[.contentType],
            type.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased() == "application/x-www-form-urlencoded"
        else {
            throw GatewayError(.unsupportedMediaType, detail: "The form must be application/x-www-form-urlencoded.")
        }
        if let length = request.headers[.contentLength].flatMap(Int.init), length > actionFormLimit {
            throw GatewayError.payloadTooLarge(actionFormLimit)
        }
        var request = request
        let buffer = try await request.collectBody(upTo: actionFormLimit)
        guard let fields = parseForm(Array(buffer.readableBytesView)) else { throw GatewayError.malformed("The form is not valid.") }
        return fields
    }

    /// `name=value&…` with `+` for space and percent-encoded UTF-8; nil when malformed or a name repeats.
    static func parseForm(_ bytes: [UInt8]) -> [String: String]? {
        var fields: [String: String] = [:]
        for pair in bytes.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let parts = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ part: ArraySlice<UInt8>) -> String? {
                let spaced = part.map { $0 == UInt8(ascii: "+") ? UInt8(ascii: " ") : $0 }
                guard spaced.allSatisfy({ $0 > 0x20 && $0 < 0x7F || $0 == 0x20 }) else { return nil }
                return String(decoding: spaced, as: UTF8.self).removingPercentEncoding
            }
            guard let name = decode(parts[0]), let value = decode(parts.count > 1 ? parts[1] : [][...]), fields[name] == nil else { return nil }
            fields[name] = value
        }
        return fields
    }
}
