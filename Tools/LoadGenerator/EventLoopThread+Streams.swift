#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import GatehouseSupport

/// What a loop's event streams report to (called on the loop thread).
protocol StreamSink: AnyObject, Sendable {
    /// Stream `index` answered with a head that is not an event stream (`status`), or failed
    /// before a head (`status` nil, `reason`); it is closed.
    func streamFailed(_ index: Int, status: Int?, reason: String)
    /// Stream `index` delivered `items`.
    func streamDelivered(_ index: Int, _ items: [SSEReceivedItem])
    /// Stream `index` ended (the server closed it, or it could not be read).
    func streamEnded(_ index: Int, reason: String)
}

/// One long-lived `GET` of an event stream on a loop (loop thread only).
final class StreamSocket {
    let fd: Int32
    let index: Int
    var request: [UInt8]
    var written = 0
    var connecting = true
    var decoder = SSEResponseDecoder(maxLineBytes: 256 << 10)
    /// Counted among the loop's opening streams until its first event (or failure).
    var opening = true
    var watchingWrites = true

    init(fd: Int32, index: Int, request: [UInt8]) {
        self.fd = fd
        self.index = index
        self.request = request
    }
}

/// A loop's event streams: open ones by descriptor, those waiting to connect, and the sink.
struct StreamLoopState {
    var sockets: [Int32: StreamSocket] = [:]
    var waiting: [(index: Int, request: [UInt8])] = []
    var opening = 0
    var window = 128
    var address: SocketAddress?
    var sink: (any StreamSink)?
}

// Event streams on the loop: many sockets per thread, no thread and no timer per stream. A
// stream connects, writes its request, and from then on only reads: each read goes through its
// `SSEResponseDecoder` and the items to the sink.
extension EventLoopThread {
    /// Queues streams to open (at most `window` connecting at once on this loop). Loop thread only.
    func openStreams(_ requests: [(index: Int, request: [UInt8])], to address: SocketAddress, window: Int, sink: any StreamSink) {
        precondition(isCurrent, "openStreams runs on its loop")
        streams.address = address
        streams.window = window
        streams.sink = sink
        streams.waiting.append(contentsOf: requests.reversed())
        openWaitingStreams()
    }

    /// Closes every stream of this loop (the run is over). Loop thread only.
    func closeStreams() {
        streams.waiting = []
        for socket in Array(streams.sockets.values) { closeStream(socket) }
    }

    /// How many streams this loop holds open or connecting.
    var streamCount: Int { streams.sockets.count }

    private func openWaitingStreams() {
        guard let address = streams.address, let sink = streams.sink else { return }
        while streams.opening < streams.window, let next = streams.waiting.popLast() {
            #if canImport(Darwin)
            let fd = socket(address.family, SOCK_STREAM, 0)
            if fd >= 0 { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
            #else
            let fd = socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            #endif
            guard fd >= 0 else {
                sink.streamFailed(next.index, status: nil, reason: "socket: \(String(cString: strerror(errno)))")
                continue
            }
            var storage = address.storage
            let code = withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, address.length) }
            }
            guard code == 0 || errno == EINPROGRESS else {
                let reason = "connect: \(String(cString: strerror(errno)))"
                closeDescriptor(fd)
                sink.streamFailed(next.index, status: nil, reason: reason)
                continue
            }
            let socket = StreamSocket(fd: fd, index: next.index, request: next.request)
            streams.sockets[fd] = socket
            streams.opening += 1
            poller.add(fd, writable: true)
        }
    }

    /// Readiness of a stream's socket.
    func handleStream(_ socket: StreamSocket, _ event: PollEvent) {
        if socket.connecting {
            guard event.writable || event.failed else { return }
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            _ = getsockopt(socket.fd, SOL_SOCKET, SO_ERROR, &error, &length)
            if error != 0 {
                failStream(socket, status: nil, reason: "connect: \(String(cString: strerror(error)))")
                return
            }
            socket.connecting = false
        }
        if socket.written < socket.request.count, event.writable || !socket.connecting {
            writeStreamRequest(socket)
            guard streams.sockets[socket.fd] === socket else { return }
        }
        if event.readable || event.failed { readStream(socket) }
    }

    private func writeStreamRequest(_ socket: StreamSocket) {
        while socket.written < socket.request.count {
            let count = socket.request.withUnsafeBytes { raw in
                #if canImport(Darwin)
                Darwin.send(socket.fd, raw.baseAddress! + socket.written, raw.count - socket.written, 0)
                #else
                Glibc.send(socket.fd, raw.baseAddress! + socket.written, raw.count - socket.written, Int32(MSG_NOSIGNAL))
                #endif
            }
            if count > 0 {
                socket.written += count
            } else if count < 0, errno == EINTR {
                continue
            } else if count < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                return
            } else {
                failStream(socket, status: nil, reason: "write: \(String(cString: strerror(errno)))")
                return
            }
        }
        socket.request = []
        if socket.watchingWrites {
            socket.watchingWrites = false
            poller.modify(socket.fd, writable: false)
        }
    }

    private func readStream(_ socket: StreamSocket) {
        guard let sink = streams.sink else { return }
        var ended: String?
        var items: [SSEReceivedItem] = []
        while ended == nil {
            let count = readBuffer.withUnsafeMutableBytes { read(socket.fd, $0.baseAddress!, $0.count) }
            if count > 0 {
                do {
                    try socket.decoder.feed(Array(readBuffer[0..<count]), into: &items)
                } catch {
                    ended = "unreadable: \(error.description)"
                }
                if count < readBuffer.count { break }
            } else if count == 0 {
                socket.decoder.finish()
                ended = "closed by the server"
            } else if errno == EINTR {
                continue
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                break
            } else {
                ended = "read: \(String(cString: strerror(errno)))"
            }
        }
        if let head = socket.decoder.head, !head.isEventStream {
            // A refusal (problem+json, 503 too_many_streams): reported once its body is whole.
            if socket.decoder.isComplete || ended != nil {
                failStream(socket, status: head.status, reason: String(decoding: socket.decoder.body.prefix(200), as: UTF8.self))
            }
            return
        }
        if !items.isEmpty {
            if socket.opening, items.contains(where: { if case .event = $0 { return true } else { return false } }) {
                socket.opening = false
                streams.opening -= 1
                openWaitingStreams()
            }
            sink.streamDelivered(socket.index, items)
        }
        if socket.decoder.isComplete, ended == nil { ended = "ended by the server" }
        if let ended {
            if socket.opening {
                failStream(socket, status: socket.decoder.head?.status, reason: ended)
            } else {
                closeStream(socket)
                sink.streamEnded(socket.index, reason: ended)
            }
        }
    }

    private func failStream(_ socket: StreamSocket, status: Int?, reason: String) {
        closeStream(socket)
        streams.sink?.streamFailed(socket.index, status: status, reason: reason)
    }

    private func closeStream(_ socket: StreamSocket) {
        guard streams.sockets[socket.fd] === socket else { return }
        streams.sockets[socket.fd] = nil
        poller.remove(socket.fd)
        closeDescriptor(socket.fd)
        if socket.opening {
            socket.opening = false
            streams.opening -= 1
            openWaitingStreams()
        }
    }
}
