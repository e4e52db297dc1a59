import Testing

@Test func placeholder_GatehouseRPCTests() { #expect(Bool(true)) }
