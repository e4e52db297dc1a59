import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A loopback TCP port that is bound but not listening: a connection to it is refused, and no
/// other test can take the port while this holds it.
final class RefusingPort: Sendable {
    let port: Int
    private let descriptor: Int32

    init() throws {
        #if canImport(Glibc)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                bind(fd, raw, length) == 0 && getsockname(fd, raw, &length) == 0
            }
        }
        guard bound else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        descriptor = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    var baseURL: String { "http://127.0.0.1:\(port)" }

    deinit { close(descriptor) }
}
