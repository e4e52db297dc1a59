// Golden interop with Python's protobuf, byte for byte in both directions. Runs protoc (from
// grpc_tools) into a temporary directory and Tests/Interop/golden.py (helpers in
// PythonSupport.swift); needs python3 with grpcio-tools and protobuf (scripts/setup installs
// them). Map entries are compared byte for byte too: ProtoCodec writes them in the order Python's
// upb-based protobuf (7.x here) uses for `SerializeToString(deterministic=True)`; a protobuf
// release that changes that order would show up here as a "bytes differ" on the "collections"
// message only.
import Foundation
import GatehouseTestSupport
import Testing

@Suite("Interop with Python protobuf")
struct InteropTests {
    @Test func pythonBytesMatchSwiftBothWays() async throws {
        guard let generated = try await generatePythonModules() else { return }
        defer { try? FileManager.default.removeItem(at: generated) }

        let encoded = try await python(["Tests/Interop/golden.py", "encode", "--gen", generated.path])
        try #require(encoded.status == 0, "golden.py encode failed: \(encoded.stderr)")
        let pythonHex = try JSONDecoder().decode([String: String].self, from: Data(encoded.stdout.utf8))
        #expect(Set(pythonHex.keys) == Set(goldenMessages.keys))

        for (name, golden) in goldenMessages.sorted(by: { $0.key < $1.key }) {
            guard let hexString = pythonHex[name], let pythonBytes = bytes(hex: hexString) else {
                Issue.record("\(name): missing from Python's output")
                continue
            }
            // Python -> Swift: Swift decodes Python's bytes to the expected value.
            #expect(try golden.decodesTo(pythonBytes), "\(name): Swift decoded Python's bytes to a different value")
            // Swift -> bytes: identical to Python's deterministic serialization.
            if golden.swiftEncodes {
                let swiftBytes = try golden.encode()
                #expect(hex(swiftBytes) == hexString, "\(name): Swift's bytes differ from Python's")
            }
        }
    }

    @Test func pythonParsesSwiftBytes() async throws {
        guard let generated = try await generatePythonModules() else { return }
        defer { try? FileManager.default.removeItem(at: generated) }

        var swiftHex: [String: String] = [:]
        for (name, golden) in goldenMessages where golden.swiftEncodes {
            swiftHex[name] = hex(try golden.encode())
        }
        let input = try JSONEncoder().encode(swiftHex)
        let checked = try await python(["Tests/Interop/golden.py", "check", "--gen", generated.path], stdin: input)
        #expect(checked.status == 0, "golden.py check failed:\n\(checked.stdout)\(checked.stderr)")
        #expect(checked.stdout.contains("0 mismatches"))
    }
}
