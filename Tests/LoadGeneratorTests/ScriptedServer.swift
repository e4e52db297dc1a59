import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing
@testable import LoadGenerator

/// A TCP server that answers each request (read up to the end of its head and any
/// `Content-Length` body) with scripted bytes, written in the given pieces, and then either keeps
/// the connection or closes it.
final class ScriptedServer: Sendable {
    struct Reply: Sendable {
        var pieces: [String]
        var close = false
        /// Delay between pieces, so the client sees them in separate reads.
        var gap: TimeAmount = .milliseconds(5)
    }

    let connections = Atomic<Int>(0)
    let requests = Atomic<Int>(0)
    /// Connections closed for being idle (`idleClose`), counted once the close is done.
    let idleClosed = Atomic<Int>(0)
    let reply: @Sendable (Int) -> Reply
    /// Close a connection that has been idle this long after a response (nil: never).
    let idleClose: TimeAmount?

    init(idleClose: TimeAmount? = nil, reply: @escaping @Sendable (Int) -> Reply) {
        self.idleClose = idleClose
        self.reply = reply
    }

    final class Handler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        let server: ScriptedServer
        var buffer: [UInt8] = []
        var idleTimer: Scheduled<Void>?
        init(server: ScriptedServer) { self.server = server }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var incoming = unwrapInboundIn(data)
            buffer += incoming.readBytes(length: incoming.readableBytes) ?? []
            idleTimer?.cancel()
            while let end = Self.requestEnd(buffer) {
                buffer.removeFirst(end)
                let n = server.requests.wrappingAdd(1, ordering: .relaxed).oldValue
                respond(context: context, server.reply(n))
            }
        }

        /// Length of the first whole request in `bytes`, if there is one.
        static func requestEnd(_ bytes: [UInt8]) -> Int? {
            let text = String(decoding: bytes, as: UTF8.self)
            guard let head = text.range(of: "\r\n\r\n") else { return nil }
            let headBytes = text[..<head.upperBound].utf8.count
            var length = 0
            for line in text[..<head.lowerBound].split(separator: "\r\n") where line.lowercased().hasPrefix("content-length:") {
                length = Int(line.dropFirst(15).trimmingCharacters(in: .whitespaces)) ?? 0
            }
            return bytes.count >= headBytes + length ? headBytes + length : nil
        }

        func respond(context: ChannelHandlerContext, _ reply: Reply) {
            let channel = context.channel
            let loop = context.eventLoop
            var delay = TimeAmount.zero
            for (index, piece) in reply.pieces.enumerated() {
                let last = index == reply.pieces.count - 1
                loop.scheduleTask(in: delay) {
                    channel.writeAndFlush(ByteBuffer(string: piece)).whenComplete { _ in
                        guard last else { return }
                        if reply.close {
                            channel.close(promise: nil)
                        } else if let idle = self.server.idleClose {
                            self.idleTimer = loop.scheduleTask(in: idle) {
                                channel.close().whenComplete { _ in self.server.idleClosed.wrappingAdd(1, ordering: .relaxed) }
                            }
                        }
                    }
                }
                delay = delay + reply.gap
            }
        }
    }

    /// Runs `body` with the server's base URL.
    func serve<T: Sendable>(_ body: (String) async throws -> T) async throws -> T {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                self.connections.wrappingAdd(1, ordering: .relaxed)
                return channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Handler(server: self)) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let url = "http://127.0.0.1:\(channel.localAddress!.port!)"
        do {
            let result = try await body(url)
            try? await channel.close()
            return result
        } catch {
            try? await channel.close()
            throw error
        }
    }
}
