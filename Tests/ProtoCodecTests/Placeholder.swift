import Testing

@Test func placeholder_ProtoCodecTests() { #expect(Bool(true)) }
