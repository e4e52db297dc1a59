// Golden interop with Python's protobuf, byte for byte in both directions. Runs protoc (from
// grpc_tools) into a temporary directory and Tests/Interop/golden.py; needs python3 with
// grpcio-tools and protobuf (scripts/setup installs them). Map entries are compared byte for byte
// too: ProtoCodec writes them in the order Python's upb-based protobuf (7.x here) uses for
// `SerializeToString(deterministic=True)`; a protobuf release that changes that order would show
// up here as a "bytes differ" on the "collections" message only.
import Foundation
import GatehouseTestSupport
import Testing

/// `python3 ARGUMENTS` run from the repository root, without blocking a cooperative thread.
private func python(_ arguments: [String], stdin: Data? = nil) async throws -> ProcessResult {
    try await runProcess(URL(fileURLWithPath: "/usr/bin/env"), ["python3"] + arguments, stdin: stdin, in: BuiltProducts.packageRoot)
}

/// Generates testing_pb2.py into a fresh temporary directory; nil (with a recorded issue) when
/// python3 or grpc_tools is missing.
private func generatePythonModules() async throws -> URL? {
    let probe = try? await python(["-c", "import grpc_tools.protoc, google.protobuf"])
    guard let probe, probe.status == 0 else {
        Issue.record("""
            python3 with grpcio-tools and protobuf is required for the interop tests: run scripts/setup \
            (or `python3 -m pip install grpcio-tools protobuf`). \(probe?.stderr ?? "python3 not found")
            """)
        return nil
    }
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("protocodec-interop-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let protoc = try await python(["-m", "grpc_tools.protoc", "-I", "proto", "--python_out=\(directory.path)", "proto/testing.proto"])
    guard protoc.status == 0 else {
        Issue.record("protoc failed: \(protoc.stderr)")
        return nil
    }
    return directory
}

private func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

private func bytes(hex: String) -> [UInt8]? {
    let digits = Array(hex.utf8)
    guard digits.count % 2 == 0 else { return nil }
    var result: [UInt8] = []
    result.reserveCapacity(digits.count / 2)
    for index in stride(from: 0, to: digits.count, by: 2) {
        guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else { return nil }
        result.append(byte)
    }
    return result
}

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
