import GatehouseContracts
@testable import GatehouseRPC
import Testing
import ZeroMQ

@Suite("CURVE links and the ZAP allow list")
struct CurveTests {
    struct Keys {
        let server = try! CurveKeyPair.generate()
        let client = try! CurveKeyPair.generate()
        let stranger = try! CurveKeyPair.generate()

        var serverKeys: CurveServerKeys {
            CurveServerKeys(publicKey: server.publicKey, secretKey: server.secretKey, allowedClientKeys: [client.publicKey])
        }

        func clientKeys(_ pair: CurveKeyPair) -> CurveClientKeys {
            CurveClientKeys(publicKey: pair.publicKey, secretKey: pair.secretKey, serverPublicKey: server.publicKey)
        }
    }

    /// A CURVE server on a free loopback port with the allow list of `keys`.
    func curveServer(_ keys: Keys) throws -> (RPCServer, String) {
        try startServer(testRouter(), endpoint: "tcp://127.0.0.1:0") { $0.curve = keys.serverKeys }
    }

    func client(_ endpoint: String, _ curve: CurveClientKeys?) throws -> RPCClient {
        var configuration = RPCClient.Configuration(endpoint: endpoint)
        configuration.curve = curve
        return try RPCClient(configuration: configuration)
    }

    @Test("with an allowed key, calls succeed over tcp and the server's own key pair is allowed too")
    func allowed() async throws {
        let keys = Keys()
        let (server, endpoint) = try curveServer(keys)
        let client = try client(endpoint, keys.clientKeys(keys.client))
        #expect(try await client.call(TestAPI.echo, Ping(text: "secret"), timeout: .seconds(5)).text == "secret")
        // A health check inside the server's container uses the server's own key pair.
        let own = try self.client(endpoint, keys.clientKeys(keys.server))
        #expect(try await own.call(TestAPI.echo, Ping(text: "self"), timeout: .seconds(5)).text == "self")
        let handler = try ZAPHandler.handler(for: .shared)
        #expect(handler.refusals(of: keys.client.publicKey) == 0)
        await client.close()
        await own.close()
        server.stop()
        await server.waitUntilStopped()
    }

    @Test("a client whose key is not on the allow list is refused (ZAP 400) and gets no answer")
    func unknownKey() async throws {
        let keys = Keys()
        let (server, endpoint) = try curveServer(keys)
        let stranger = try client(endpoint, keys.clientKeys(keys.stranger))
        do {
            _ = try await stranger.call(TestAPI.echo, Ping(text: "let me in"), timeout: .milliseconds(800))
            Issue.record("a client with an unknown key got an answer")
        } catch let error as RPCError {
            #expect(error.code == .unavailable || error.code == .deadlineExceeded)
        }
        let handler = try ZAPHandler.handler(for: .shared)
        #expect(try await waitUntil { handler.refusals(of: keys.stranger.publicKey) > 0 })
        // The allowed client is unaffected.
        let allowed = try client(endpoint, keys.clientKeys(keys.client))
        #expect(try await allowed.call(TestAPI.echo, Ping(text: "ok"), timeout: .seconds(5)).text == "ok")
        await stranger.close()
        await allowed.close()
        server.stop()
        await server.waitUntilStopped()
    }

    @Test("a plain-text client of a CURVE server is refused")
    func plainTextClient() async throws {
        let keys = Keys()
        let (server, endpoint) = try curveServer(keys)
        let plain = try client(endpoint, nil)
        do {
            _ = try await plain.call(TestAPI.echo, Ping(text: "hello?"), timeout: .milliseconds(800))
            Issue.record("a plain-text client got an answer from a CURVE server")
        } catch let error as RPCError {
            #expect(error.code == .unavailable || error.code == .deadlineExceeded)
        }
        await plain.close()
        server.stop()
        await server.waitUntilStopped()
    }

    @Test("a client that expects the wrong server key is refused")
    func wrongServerKey() async throws {
        let keys = Keys()
        let (server, endpoint) = try curveServer(keys)
        let impostor = try CurveKeyPair.generate()
        let confused = try client(endpoint, CurveClientKeys(
            publicKey: keys.client.publicKey, secretKey: keys.client.secretKey, serverPublicKey: impostor.publicKey))
        await #expect(throws: RPCError.self) {
            try await confused.call(TestAPI.echo, Ping(text: "x"), timeout: .milliseconds(800))
        }
        await confused.close()
        server.stop()
        await server.waitUntilStopped()
    }

    @Test("events flow PUB → SUB under CURVE to allowed subscribers only")
    func events() async throws {
        let keys = Keys()
        let publisher = try EventPublisher(endpoints: ["tcp://127.0.0.1:0"], curve: keys.serverKeys)
        let subscriber = try EventSubscriber(endpoints: publisher.endpoints, topics: ["user."], curve: keys.clientKeys(keys.client))
        let stranger = try EventSubscriber(endpoints: publisher.endpoints, topics: [""], curve: keys.clientKeys(keys.stranger))
        // Publishes every 5 ms until the subscriber has an event (subscriptions propagate asynchronously).
        let publishing = Task {
            while !Task.isCancelled {
                publisher.publish(topic: "user.created", payload: [42])
                try await Task.sleep(for: .milliseconds(5))
            }
        }
        var received: Event?
        for await event in subscriber.events {
            received = event
            break
        }
        #expect(received == Event(topic: "user.created", payload: [42]))
        let handler = try ZAPHandler.handler(for: .shared)
        #expect(try await waitUntil { handler.refusals(of: keys.stranger.publicKey) > 0 })
        publishing.cancel()
        await publisher.close()
        // The refused subscriber's stream ends empty once closed.
        await stranger.close()
        var leaked = 0
        for await _ in stranger.events { leaked += 1 }
        #expect(leaked == 0)
        await subscriber.close()
    }

    @Test("the ZAP handler answers RFC 27 requests: allowed key 200, others 400")
    func zapAnswers() throws {
        let keys = Keys()
        let handler = try ZAPHandler.handler(for: .shared)
        let domain = handler.register(allowedClientKeys: [keys.client.publicKey], serverKey: keys.server.publicKey, prefix: "test")
        defer { handler.unregister(domain) }
        func request(domain: String, mechanism: String, key: [UInt8]?) -> [[UInt8]] {
            var frames = [Array("1.0".utf8), Array("7".utf8), Array(domain.utf8), Array("127.0.0.1".utf8), [], Array(mechanism.utf8)]
            if let key { frames.append(key) }
            return frames
        }
        func status(_ reply: [[UInt8]]) -> String { String(decoding: reply[2], as: UTF8.self) }

        let ok = handler.answer(request(domain: domain, mechanism: "CURVE", key: keys.client.publicKey))
        #expect(ok.count == 6)
        #expect(ok[0] == Array("1.0".utf8))
        #expect(ok[1] == Array("7".utf8))
        #expect(status(ok) == "200")
        #expect(String(decoding: ok[4], as: UTF8.self) == keys.client.publicKeyZ85)
        #expect(status(handler.answer(request(domain: domain, mechanism: "CURVE", key: keys.server.publicKey))) == "200")
        #expect(status(handler.answer(request(domain: domain, mechanism: "CURVE", key: keys.stranger.publicKey))) == "400")
        #expect(status(handler.answer(request(domain: domain, mechanism: "NULL", key: nil))) == "400")
        #expect(status(handler.answer(request(domain: domain, mechanism: "PLAIN", key: Array("user".utf8)))) == "400")
        #expect(status(handler.answer(request(domain: "no-such-domain", mechanism: "CURVE", key: keys.client.publicKey))) == "400")
        #expect(status(handler.answer([Array("1.0".utf8)])) == "400")
        #expect(handler.counts(domain: domain) == (accepted: 2, refused: 3))  // the unknown domain counts nowhere
        #expect(handler.refusals(of: keys.stranger.publicKey) == 1)
    }
}
