// Test helper for the kill -9 durability test: opens the users database given as the first
// argument, then inserts users one transaction at a time, printing each id on stdout only after
// its insert returned (was acknowledged). It stops by itself after 60 s in case nobody kills it.
import Foundation
import SQLiteStores
import IdentityPorts
import IdentityCore
import IdentityService

func runCrashWriter() -> Int32 {
    let arguments = CommandLine.arguments
    guard arguments.count >= 2 else {
        FileHandle.standardError.write(Data("usage: identity-crash-writer DATABASE\n".utf8))
        return 2
    }
    do {
        let store = try SQLiteUserStore(path: arguments[1])
        try store.migrateSync()
        let started = Date()
        var index = 0
        while Date().timeIntervalSince(started) < 60 {
            index += 1
            let email = try EmailAddress("crash\(index)-\(UInt32.random(in: 0...UInt32.max))@example.com")
            let user = UserRecord(id: .random(), email: email, passwordHash: "$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHQ$aGFzaA", createdAt: Date())
            try store.insertSync(user)
            print(user.id.rawValue)
            fflush(nil)
        }
        return 0
    } catch {
        FileHandle.standardError.write(Data("identity-crash-writer: \(error)\n".utf8))
        return 1
    }
}

exit(runCrashWriter())
