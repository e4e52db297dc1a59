import Foundation
import GatehouseApp
import GatehouseTestSupport
import Testing

/// The link in a password reset mail, followed in a real browser: headless Chromium driven by
/// Selenium (`Tests/Interop/browser_reset.py`) against three processes. The script opens the
/// link, submits two different passwords (the page must refuse them), then the new one twice, and
/// checks the success text; screenshots go to `$GATEHOUSE_TEST_ARTIFACTS/browser` (else
/// `.build/test-artifacts/browser/`). Then the new password signs in over HTTP.
///
/// Needs the Debian packages `chromium` and `chromium-driver` and the Python package `selenium`
/// (scripts/setup installs them). Without them the test is skipped locally, and FAILS in CI
/// (`CI=true`), saying what is missing.
@Suite("Password reset in a browser over three processes")
struct BrowserResetEndToEndTests {
    static let pw = "correct horse battery"
    static let newPW = "saffron kettle obelisk"
    static let script = BuiltProducts.packageRoot.appendingPathComponent("Tests/Interop/browser_reset.py").path
    static let isCI = ProcessInfo.processInfo.environment["CI"] == "true"

    /// What is missing to drive a browser, or nil (asks the script, once).
    static let missing: String? = {
        do {
            let checked = try runProcessSync(URL(fileURLWithPath: "/usr/bin/env"), ["python3", script, "--check"])
            return checked.status == 0 ? nil : (checked.stdout + checked.stderr).trimmingCharacters(in: .whitespacesAndNewlines)
        } catch {
            return "python3 could not be started: \(error)"
        }
    }()

    /// Where the screenshots go.
    static var artifacts: URL {
        if let folder = ProcessInfo.processInfo.environment["GATEHOUSE_TEST_ARTIFACTS"], !folder.isEmpty {
            return URL(fileURLWithPath: folder).appendingPathComponent("browser")
        }
        return BuiltProducts.packageRoot.appendingPathComponent(".build/test-artifacts/browser")
    }

    @Test(
        "A30 in Chromium: the mailed link opens the reset page, a mismatched confirmation is refused, the new password is set and signs in",
        .enabled(if: missing == nil || isCI, "Chromium, chromedriver or selenium is missing (run scripts/setup)"))
    func resetInBrowser() async throws {
        if let missing = Self.missing {
            Issue.record("The browser test cannot run in CI: \(missing). scripts/setup installs chromium, chromium-driver and selenium.")
            return
        }
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let signedUp = try await stack.request("POST", "/v1/accounts", json: ["email": "ada@example.com", "password": Self.pw])
        #expect(signedUp.status == 201)
        let access = try #require((signedUp.json["session"] as? [String: Any])?["accessToken"] as? String)
        #expect(try await stack.request("POST", "/v1/password-reset", json: ["email": "ada@example.com"]).status == 202)

        // The link in the delivered mail points at this gateway's pages (the default link base).
        try await waitUntil("the reset mail is delivered") { try !stack.deliveredMails("password_reset").isEmpty }
        let link = try #require(try stack.deliveredMails("password_reset").first?.link)
        #expect(link.hasPrefix(stack.baseURL + "/actions?mode=resetPassword&code="), "\(link)")
        #expect(link.hasSuffix("&lang=en"))

        // A mail scanner's GET changes nothing (the browser uses the code afterwards) and gets the strict headers.
        let scanned = try await stack.request("GET", String(link.dropFirst(stack.baseURL.count)))
        #expect(scanned.status == 200)
        #expect(scanned.headers["content-security-policy"]?.hasPrefix("default-src 'none'; style-src 'sha256-") == true)
        #expect(scanned.headers["x-frame-options"] == "DENY" && scanned.headers["referrer-policy"] == "no-referrer")
        #expect(scanned.headers["cache-control"] == "no-store" && scanned.headers["x-content-type-options"] == "nosniff")

        let folder = Self.artifacts
        try? FileManager.default.removeItem(at: folder)
        // Bounded: a browser that hangs fails the test (status 124) instead of holding the run.
        let run = try await runProcess(
            URL(fileURLWithPath: "/usr/bin/env"),
            ["timeout", "120", "python3", Self.script, "--link", link, "--password", Self.newPW, "--screenshots", folder.path])
        #expect(run.status == 0, "browser_reset.py failed (status \(run.status), 124: timed out; screenshots in \(folder.path)):\n\(run.stderr)\n\(run.stdout)")
        for name in ["01-form.png", "02-mismatch.png", "03-done.png"] {
            #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent(name).path), "no screenshot \(name)")
        }

        // The new password signs in; the old one and the old session do not.
        let signIn = try await stack.request("POST", "/v1/sessions", json: ["email": "ada@example.com", "password": Self.newPW])
        #expect(signIn.status == 200)
        let old = try await stack.request("POST", "/v1/sessions", json: ["email": "ada@example.com", "password": Self.pw])
        #expect(old.status == 401)
        #expect(try await stack.request("GET", "/v1/me", bearer: access).status == 401)
    }
}
