import Testing

@Test func placeholder_ZeroMQTests() { #expect(Bool(true)) }
