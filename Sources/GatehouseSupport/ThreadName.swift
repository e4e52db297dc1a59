import Foundation

/// The calling thread's name as `top -H`, `perf` and debuggers show it.
///
/// Set on the pthread itself: on Linux, Foundation's `Thread.current.name` setter did not always
/// reach it (a worker kept the name it inherited from the dispatch thread that created it).
/// Linux keeps at most 15 bytes.
public enum ThreadName {
    /// Names the calling thread (cut to 15 bytes on Linux).
    public static func set(_ name: String) {
        #if os(Linux)
        // The calling thread's `comm` (what pthread_setname_np writes; not exported to Swift).
        try? String(decoding: name.utf8.prefix(15), as: UTF8.self)
            .write(toFile: "/proc/thread-self/comm", atomically: false, encoding: .utf8)
        #else
        Thread.current.name = name
        #endif
    }

    /// The calling thread's name.
    public static var current: String {
        #if os(Linux)
        let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
        return comm.trimmingCharacters(in: .newlines)
        #else
        return Thread.current.name ?? ""
        #endif
    }
}
