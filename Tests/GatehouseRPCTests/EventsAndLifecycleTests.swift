import GatehouseContracts
import GatehouseRPC
import Logging
import ServiceLifecycle
import ServiceLifecycleTestKit
import Testing

@Suite("Events and lifecycle")
struct EventsAndLifecycleTests {
    struct UserCreated: Codable, Sendable, Equatable {
        var userID: String
        enum CodingKeys: Int, CodingKey { case userID = 1 }
    }

    @Test("a subscriber receives the topics it asked for, decoded, and not the others")
    func events() async throws {
        let publisher = try EventPublisher(endpoints: ["tcp://127.0.0.1:0"])
        let subscriber = try EventSubscriber(endpoints: publisher.endpoints, topics: ["user."])
        // Subscriptions propagate asynchronously: publish until the first event arrives.
        let publishing = Task {
            var n = 0
            while !Task.isCancelled {
                publisher.publish(topic: "session.revoked", payload: [1])
                try publisher.publish(topic: "user.created", UserCreated(userID: "u\(n)"))
                n += 1
                try await Task.sleep(for: .milliseconds(5))
            }
        }
        var received: [Event] = []
        for await event in subscriber.events {
            received.append(event)
            if received.count == 3 { break }
        }
        publishing.cancel()
        #expect(received.allSatisfy { $0.topic == "user.created" })
        let first = try received[0].decode(UserCreated.self)
        #expect(first.userID.hasPrefix("u"))
        await subscriber.close()
        await publisher.close()
    }

    @Test("a ServiceGroup's graceful shutdown drains the RPC server")
    func serviceGroupShutdown() async throws {
        let server = try RPCServer(router: testRouter(), configuration: .init(endpoints: ["tcp://127.0.0.1:0"]))
        let endpoint = try server.start()[0]
        let client = try RPCClient(configuration: .init(endpoint: endpoint))
        try await testGracefulShutdown { trigger in
            let group = ServiceGroup(configuration: .init(services: [server], logger: Logger(label: "test")))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                let pending = Task { try await client.call(TestAPI.echo, Ping(text: "in flight", delayMs: 300), timeout: .seconds(10)) }
                #expect(try await waitUntil { server.inFlight == 1 })
                trigger.triggerGracefulShutdown()
                #expect(try await pending.value.text == "in flight")
                try await tasks.waitForAll()
            }
        }
        await client.close()
    }
}
