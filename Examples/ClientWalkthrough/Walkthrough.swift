import Foundation
import GatehouseClient

/// A walk through two of the reference apps' flows with the client library, against the
/// Gatehouse at the URL given (`gatehouse-client-example http://127.0.0.1:8080`):
///
/// - seed 000 (TCA, email and password): sign up, sign out, sign in, show the user, sign out;
/// - seed 002 (RxFireAuth, anonymous first): start anonymous, then sign in to the account made
///   above, which answers `migrationRequired`; the app asks the user (here: yes) and resumes.
///
/// Each step prints one line; any failure prints the error's user-facing message and exits 1.
@main
struct Walkthrough {
    static func main() async {
        let arguments = CommandLine.arguments
        guard arguments.count == 2, let baseURL = URL(string: arguments[1]) else {
            FileHandle.standardError.write(Data("usage: gatehouse-client-example <gateway URL>\n".utf8))
            exit(2)
        }
        do {
            try await run(baseURL)
        } catch let error as GatehouseError {
            print("failed: \(error.localizedDescription) (\(error.code ?? "no code"))")
            exit(1)
        } catch {
            print("failed: \(error)")
            exit(1)
        }
    }

    static func run(_ baseURL: URL) async throws {
        let email = "walkthrough-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let password = "correct horse battery staple"

        // Seed 000: its `AuthClient` wraps these three calls; the view switches on the user.
        let app = GatehouseClient(baseURL: baseURL)
        let signedUp = try await app.signUp(email: email, password: password)
        print("seed 000: signed up \(signedUp.user.email ?? "") as \(signedUp.user.id)")
        await app.signOut()
        print("seed 000: signed out, state \(describe(await app.currentState))")
        let signedIn = try await app.signIn(email: email, password: password)
        print("seed 000: signed in, ようこそ、\(signedIn.user.email ?? "")")
        let me = try await app.reloadUser()
        print("seed 000: user \(me.id) \(me.email ?? "") providers \(me.providers.joined(separator: ","))")
        do {
            try await app.signIn(email: email, password: "not the password")
        } catch let error as GatehouseError {
            // The message the seed shows in red under the form.
            print("seed 000: wrong password says \"\(error.localizedDescription)\"")
        }
        await app.signOut()
        print("seed 000: signed out, state \(describe(await app.currentState))")

        // Seed 002: anonymous at first launch; signing in to an existing account asks first.
        let anonymousApp = GatehouseClient(baseURL: baseURL)
        let anonymous = try await anonymousApp.signInAnonymously()
        print("seed 002: anonymous user \(anonymous.id), state \(describe(await anonymousApp.currentState))")
        do {
            try await anonymousApp.signIn(email: email, password: password)
            print("seed 002: signed in without a migration (unexpected)")
        } catch GatehouseError.migrationRequired(let context) {
            print("seed 002: migration required from \(context.anonymousUserID) to \(context.existingUserID)")
            let resumed = try await anonymousApp.resume(context, allowMigration: true)
            print("seed 002: resumed as \(resumed.user.id), anonymous \(resumed.migration?.oldUserId ?? "-") deleted, state \(describe(await anonymousApp.currentState))")
        }
        await anonymousApp.signOut()
        print("seed 002: signed out, state \(describe(await anonymousApp.currentState))")
    }

    static func describe(_ state: AuthState) -> String {
        switch state {
        case .signedOut: return "signed out"
        case .anonymous: return "anonymous"
        case .signedIn(let user): return "signed in as \(user.email ?? user.id)"
        }
    }
}
