import Foundation
import GatehouseContracts
import GatehouseSupport
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle

extension HTTPField.Name {
    static let lastEventID = Self("Last-Event-ID")!
    static let xAccelBuffering = Self("X-Accel-Buffering")!
}

/// `GET /v1/me/events`: the caller's user as Server-Sent Events (`StreamHub`, `EventStream`).
extension GatewayRoutes {
    /// Authenticates like `GET /v1/me`; registers the stream (so live changes are kept from now),
    /// reads the snapshot or the changes after `Last-Event-ID` (`identity.userChanges`), and only
    /// then answers 200 and streams: every error (401, 400, 503) comes before any stream byte.
    @Sendable func events(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let claims = try await authenticate(request)
        let lastEventID = try Self.lastEventID(request)
        let hub = streams
        try await hub.waitForFeed(timeout: configuration.requestTimeout)
        let stream = try hub.open(userID: claims.sub, sessionID: claims.sid, expiresAt: claims.exp)
        let channel = context.channel
        stream.attach(abort: { channel.close(promise: nil) }, writable: { channel.isWritable })
        let reply: UserChangesResponse
        do {
            // Revoked between the check above and the registration: its event may have passed.
            if revocations.list.contains(claims.sid, now: clock.now) {
                throw GatewayError.invalidToken(.sessionRevoked, "The session has been revoked.")
            }
            let changes = UserChangesRequest(
                userID: claims.sub, resume: lastEventID != nil, afterSeq: lastEventID ?? 0, limit: IdentityAPI.maxChangesPage)
            reply = try await call(services.identity, IdentityAPI.userChanges, changes)
        } catch {
            stream.abort(.disconnected, closing: false)
            hub.remove(stream)
            throw error
        }
        if stream.start(reply) != nil { hub.remove(stream) } else { hub.admitted(stream) }

        // A client that goes away half-closes or resets: end the stream now, not at the next write.
        let watcher = InputClosedWatcher()
        channel.pipeline.addHandler(watcher, position: .first).whenFailure { _ in hub.abort(stream, .disconnected) }
        // Weak: a keep-alive connection that carries many streams one after another does not
        // keep the ended ones alive until it closes.
        channel.closeFuture.whenComplete { [weak stream] _ in if let stream { hub.abort(stream, .disconnected) } }

        let headers: HTTPFields = [
            .contentType: "text/event-stream", .cacheControl: "no-store", .xAccelBuffering: "no",
        ]
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in
            defer {
                hub.remove(stream)
                channel.pipeline.removeHandler(watcher, promise: nil)
            }
            // The server waits for open requests at shutdown: a stream ends with `shutting_down`.
            try await withGracefulShutdownHandler {
                while let chunk = await stream.next() { try await writer.write(chunk) }
            } onGracefulShutdown: {
                hub.close(stream, .shuttingDown)
            }
            try await writer.finish(nil)
        })
    }

    /// The `Last-Event-ID` header, else the `lastEventId` query parameter: a decimal id of at
    /// most 20 digits that fits 64 bits; nil when neither is given.
    static func lastEventID(_ request: Request) throws -> UInt64? {
        guard let text = request.headers[.lastEventID] ?? request.uri.queryParameters.get("lastEventId") else { return nil }
        guard (1...20).contains(text.utf8.count), text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let id = UInt64(text) else {
            throw GatewayError(.invalidLastEventID, detail: ErrorTable.entry(.invalidLastEventID).detail ?? "Invalid Last-Event-ID.")
        }
        return id
    }
}

/// Closes the connection when the client ends its side (with remote half-closure allowed, a
/// client that goes away is otherwise noticed only at the next write). Added in front of the
/// pipeline for the life of one stream.
final class InputClosedWatcher: ChannelInboundHandler, RemovableChannelHandler, Sendable {
    typealias InboundIn = NIOAny

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event as? ChannelEvent == .inputClosed { context.close(promise: nil) }
        context.fireUserInboundEventTriggered(event)
    }
}
