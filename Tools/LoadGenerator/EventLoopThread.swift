#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// One event-loop thread: owns its connections and runs the tasks that prefer its executor.
///
/// Everything but `remote`, `signalled` and the wake-up pipe is touched on the loop thread only
/// (hence `@unchecked Sendable`): `send` checks it runs there, and other threads reach the loop
/// only through `executor.enqueue`, which queues under the `remote` lock and writes to the pipe.
final class EventLoopThread: TaskExecutor, @unchecked Sendable {
    /// The loop is its own executor: jobs run on the loop thread, and once the loop has stopped,
    /// on the global executor.
    var executor: any TaskExecutor { self }
    let name: String

    // Shared with other threads.
    private struct Remote {
        var jobs: [UnownedJob] = []
        var stopping = false
        var stopped = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let remote = Mutex(Remote())
    /// True while the loop will look at `remote` again before it sleeps: producers then need
    /// not write to the pipe.
    private let signalled = Atomic<Bool>(false)
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let started = DispatchSemaphore(value: 0)
    private var thread: pthread_t?

    // Loop thread only.
    var poller: any Poller
    private var localJobs: [UnownedJob] = []
    var connections: [Int32: Connection] = [:]
    var idle: [Connection] = []
    var inFlight = 0
    var nextTimeoutScan: UInt64 = 0
    var readBuffer = [UInt8](repeating: 0, count: 64 << 10)
    /// Long-lived event streams (the `stream` scenario, EventLoopThread+Streams.swift).
    var streams = StreamLoopState()
    /// Set when the loop has ended: `send` refuses from then on.
    var ended = false

    init(name: String, poller kind: PollerKind) throws {
        self.name = name
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw LoopHTTPClient.Failure(kind: .io, description: "pipe: \(String(cString: strerror(errno)))") }
        wakeRead = fds[0]
        wakeWrite = fds[1]
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        switch kind {
        #if os(Linux)
        case .epoll: poller = try EpollPoller()
        #else
        case .epoll: poller = PollPoller()
        #endif
        case .poll: poller = PollPoller()
        }
        poller.add(wakeRead, writable: false)
        let thread = Thread { [self] in
            self.thread = pthread_self()
            started.signal()
            run()
        }
        thread.name = name
        thread.stackSize = 1 << 20
        thread.start()
        started.wait()
    }

    /// Whether the calling thread is this loop's.
    var isCurrent: Bool {
        guard let thread else { return false }
        return pthread_equal(pthread_self(), thread) != 0
    }

    func enqueue(_ job: consuming ExecutorJob) {
        enqueueUnowned(UnownedJob(job))
    }

    private func enqueueUnowned(_ job: UnownedJob) {
        if isCurrent {
            localJobs.append(job)
            return
        }
        let accepted = remote.withLock { state -> Bool in
            if state.stopped { return false }
            state.jobs.append(job)
            return true
        }
        guard accepted else {
            globalConcurrentExecutor.enqueue(job)
            return
        }
        if !signalled.exchange(true, ordering: .sequentiallyConsistent) { wake() }
    }

    private func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    /// Stops the loop after the jobs queued so far, fails what is in flight, closes connections.
    func stop() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = remote.withLock { state -> Bool in
                if state.stopped { return true }
                state.stopping = true
                state.waiters.append(continuation)
                return false
            }
            if done { continuation.resume() } else { wake() }
        }
    }

    // MARK: The loop

    private func run() {
        var remoteJobs: [UnownedJob] = []
        var running: [UnownedJob] = []
        var events: [PollEvent] = []
        var sink = [UInt8](repeating: 0, count: 64)
        let unownedExecutor = asUnownedTaskExecutor()
        while true {
            // Jobs first: tasks resumed by the last replies write their next requests.
            while !localJobs.isEmpty {
                swap(&localJobs, &running)
                for job in running { job.runSynchronously(on: unownedExecutor) }
                running.removeAll(keepingCapacity: true)
            }
            // May we sleep? From here on a producer writes to the pipe.
            signalled.store(false, ordering: .sequentiallyConsistent)
            let (stopping, pending) = remote.withLock { state -> (Bool, Bool) in
                swap(&state.jobs, &remoteJobs)
                return (state.stopping, !remoteJobs.isEmpty)
            }
            if pending || stopping { signalled.store(true, ordering: .sequentiallyConsistent) }
            for job in remoteJobs { localJobs.append(job) }
            remoteJobs.removeAll(keepingCapacity: true)
            if stopping && localJobs.isEmpty { break }
            let timeout: Int32 = !localJobs.isEmpty ? 0 : inFlight > 0 ? 5 : -1
            poller.wait(timeoutMilliseconds: timeout, into: &events)
            signalled.store(true, ordering: .sequentiallyConsistent)
            for event in events {
                if event.fd == wakeRead {
                    while read(wakeRead, &sink, sink.count) > 0 {}
                    continue
                }
                if let connection = connections[event.fd] {
                    handle(connection, event)
                } else if let stream = streams.sockets[event.fd] {
                    handleStream(stream, event)
                }
            }
            if inFlight > 0 { expireTimeouts() }
        }
        // Stop: fail whatever waits, close everything, run what that resumed (any request it
        // sends is refused), then hand later jobs to the global executor.
        ended = true
        closeStreams()
        for connection in Array(connections.values) {
            if connection.continuation != nil {
                finish(connection, .failure(LoopHTTPClient.Failure(kind: .connectionClosed, description: "the load generator stopped")))
            } else {
                close(connection)
            }
        }
        while !localJobs.isEmpty {
            swap(&localJobs, &running)
            for job in running { job.runSynchronously(on: unownedExecutor) }
            running.removeAll(keepingCapacity: true)
        }
        let waiters = remote.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.stopped = true
            swap(&state.jobs, &remoteJobs)
            defer { state.waiters = [] }
            return state.waiters
        }
        for job in remoteJobs { globalConcurrentExecutor.enqueue(job) }
        closeDescriptor(wakeRead)
        closeDescriptor(wakeWrite)
        poller.close()
        for waiter in waiters { waiter.resume() }
    }
}

@inline(__always) func closeDescriptor(_ fd: Int32) {
    #if canImport(Darwin)
    _ = Darwin.close(fd)
    #else
    _ = Glibc.close(fd)
    #endif
}
