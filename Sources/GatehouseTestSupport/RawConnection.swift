import Foundation

#if canImport(Glibc)
import Glibc
private let streamSocket = Int32(SOCK_STREAM.rawValue)
private let noSignal = Int32(MSG_NOSIGNAL)
private func sendBytes(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int { Glibc.send(fd, bytes.baseAddress, bytes.count, noSignal) }
#else
import Darwin
private let streamSocket = SOCK_STREAM
private func sendBytes(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int { Darwin.send(fd, bytes.baseAddress, bytes.count, 0) }
#endif

/// A raw TCP client for the HTTP layer's tests: sends exactly the bytes given (broken framing,
/// stalled heads and bodies) and reads what comes back, without blocking a thread (the socket is
/// non-blocking; waiting goes through `waitUntil`).
public final class RawConnection: @unchecked Sendable {
    /// The socket.
    public let fd: Int32
    private var received: [UInt8] = []
    private var consumed = 0
    /// The server closed (or reset) the connection.
    public private(set) var closed = false

    /// Connects to `127.0.0.1:port` from the source address `source` (on Linux any 127.x.y.z is
    /// local, so a test can play clients at many addresses).
    public static func open(port: Int, from source: String = "127.0.0.1") async throws -> RawConnection {
        let connection = try RawConnection(port: port, source: source)
        try await waitUntil("connected from \(source)", timeout: .seconds(20)) { try connection.isConnected() }
        return connection
    }

    /// Starts connecting; `isConnected()` tells when done.
    public init(port: Int, source: String) throws {
        fd = socket(AF_INET, streamSocket, 0)
        guard fd >= 0 else { throw RawError("socket: errno \(errno)") }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var local = Self.address(source, port: 0)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else {
            close(fd)
            throw RawError("bind \(source): errno \(errno)")
        }
        var remote = Self.address("127.0.0.1", port: port)
        let rc = withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 || errno == EINPROGRESS else {
            close(fd)
            throw RawError("connect: errno \(errno)")
        }
    }

    deinit { if descriptorOpen { close(fd) } }

    private var descriptorOpen = true

    /// Closes the socket now, as a client that goes away does (the kernel resets the connection
    /// when data was left unread, else sends a FIN and resets what comes after); `closed` from
    /// then on, and nothing reads or writes the descriptor again.
    public func closeSocket() {
        guard descriptorOpen else { return }
        descriptorOpen = false
        closed = true
        close(fd)
    }

    private static func address(_ ip: String, port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr(ip)
        return address
    }

    /// Whether the connection is established (throws when it failed).
    public func isConnected() throws -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        guard poll(&p, 1, 0) == 1 else { return false }
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
        guard error == 0 else { throw RawError("connect failed: errno \(error)") }
        return true
    }

    /// Sends all of `text`, waiting while the socket buffer is full.
    public func send(_ text: String) async throws { try await send(Array(text.utf8)) }

    /// Sends all of `bytes`, waiting while the socket buffer is full.
    public func send(_ bytes: [UInt8]) async throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { sendBytes(fd, $0) }
            if n > 0 {
                offset += n
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                _ = pump()  // keep reading, so a server answering early is not blocked by us
                try await Task.sleep(for: .milliseconds(5))
            } else {
                throw RawError("send: errno \(errno)")
            }
        }
    }

    /// Ends our side of the stream (the server sees end of input; it can still answer).
    public func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    /// Ends the connection both ways (a FIN; the descriptor is closed when this object goes).
    public func closeBothWays() { shutdown(fd, Int32(SHUT_RDWR)) }

    /// Reads whatever has arrived; true when something changed.
    @discardableResult
    public func pump() -> Bool {
        var changed = false
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while !closed {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                received.append(contentsOf: buffer[0..<n])
                changed = true
            } else if n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) {
                closed = true
                changed = true
            } else {
                break
            }
        }
        return changed
    }

    /// The next whole response, waiting up to `timeout`.
    public func response(timeout: Duration = .seconds(10)) async throws -> RawResponse {
        var response: RawResponse?
        try await waitUntil("a response", timeout: timeout) {
            pump()
            response = nextResponse()
            return response != nil || closed
        }
        guard let response else { throw RawError("closed without a (whole) response; got \(String(decoding: received[consumed...], as: UTF8.self))") }
        return response
    }

    /// A whole response if one has arrived, without waiting.
    public func takeResponse() -> RawResponse? {
        pump()
        return nextResponse()
    }

    /// Waits until the server closes the connection.
    public func waitForClose(timeout: Duration = .seconds(10)) async throws {
        try await waitUntil("the server closes the connection", timeout: timeout) {
            pump()
            return closed
        }
    }

    /// Bytes received and not yet parsed as a response.
    public var unread: [UInt8] {
        pump()
        return Array(received[consumed...])
    }

    /// Parses one response (with a Content-Length body) from the unread bytes.
    private func nextResponse() -> RawResponse? {
        let bytes = received[consumed...]
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        guard let end = bytes.indices.first(where: { bytes[$0...].starts(with: separator) }) else { return nil }
        let head = String(decoding: bytes[consumed..<end], as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { return nil }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let length = headers["content-length"].flatMap { Int($0) } ?? 0
        let bodyStart = end + separator.count
        guard received.count - bodyStart >= length else { return nil }
        consumed = bodyStart + length
        return RawResponse(status: status, headers: headers, body: Array(received[bodyStart..<consumed]))
    }
}

/// One HTTP response read by `RawConnection`.
public struct RawResponse: Sendable {
    /// The status code.
    public var status: Int
    /// Header fields by lowercased name.
    public var headers: [String: String]
    /// The body (Content-Length bytes).
    public var body: [UInt8]

    /// The body as a JSON object (empty when it is not one).
    public var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:] }

    /// What is wrong with this response as an RFC 9457 problem with `status` and `code`
    /// (`application/problem+json`, `type`, `status`, `code`, a detail); empty when nothing is.
    public func problemMismatches(_ status: Int, _ code: String) -> [String] {
        var wrong: [String] = []
        let text = String(decoding: body, as: UTF8.self)
        if self.status != status { wrong.append("status \(self.status), not \(status): \(text)") }
        if headers["content-type"] != "application/problem+json" { wrong.append("content type \(headers["content-type"] ?? "none")") }
        if json["code"] as? String != code { wrong.append("code is not \(code): \(text)") }
        if json["status"] as? Int != status { wrong.append("body status is not \(status)") }
        if json["type"] as? String != "https://gatehouse.dev/errors/\(code)" { wrong.append("type: \(json["type"] ?? "none")") }
        if (json["detail"] as? String)?.isEmpty != false { wrong.append("no detail") }
        return wrong
    }
}

/// A failure of `RawConnection`.
public struct RawError: Error, CustomStringConvertible {
    /// What failed.
    public let description: String
    init(_ description: String) { self.description = description }
}

/// Raises the soft limit on open files to at least `count` (bounded by the hard limit); the
/// limit in force after.
@discardableResult
public func raiseOpenFileLimit(to count: Int) -> Int {
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    if limit.rlim_cur < rlim_t(count) {
        limit.rlim_cur = min(rlim_t(count), limit.rlim_max)
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
    return Int(limit.rlim_cur)
}

