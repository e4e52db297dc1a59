// Golden interop with Python's protobuf, byte for byte in both directions. Runs protoc (from
// grpc_tools) into a temporary directory and Tests/Interop/golden.py; needs python3 with
// grpcio-tools and protobuf (scripts/setup installs them). Map entries are compared byte for byte
// too: ProtoCodec writes them in the order Python's upb-based protobuf (7.x here) uses for
// `SerializeToString(deterministic=True)`; a protobuf release that changes that order would show
// up here as a "bytes differ" on the "collections" message only.
import Foundation
import Testing

private let repoRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

private struct ProcessResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

private func python(_ arguments: [String], stdin: Data? = nil) throws -> ProcessResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3"] + arguments
    process.currentDirectoryURL = repoRoot
    let output = Pipe()
    let errors = Pipe()
    let input = Pipe()
    process.standardOutput = output
    process.standardError = errors
    process.standardInput = input
    try process.run()
    if let stdin { input.fileHandleForWriting.write(stdin) }
    try input.fileHandleForWriting.close()
    let out = output.fileHandleForReading.readDataToEndOfFile()
    let err = errors.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return ProcessResult(
        status: process.terminationStatus, stdout: String(decoding: out, as: UTF8.self),
        stderr: String(decoding: err, as: UTF8.self))
}

/// Generates testing_pb2.py into a fresh temporary directory; nil (with a recorded issue) when
/// python3 or grpc_tools is missing.
private func generatePythonModules() throws -> URL? {
    let probe = try? python(["-c", "import grpc_tools.protoc, google.protobuf"])
    guard let probe, probe.status == 0 else {
        Issue.record("""
            python3 with grpcio-tools and protobuf is required for the interop tests: run scripts/setup \
            (or `python3 -m pip install grpcio-tools protobuf`). \(probe?.stderr ?? "python3 not found")
            """)
        return nil
    }
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("protocodec-interop-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let protoc = try python(["-m", "grpc_tools.protoc", "-I", "proto", "--python_out=\(directory.path)", "proto/testing.proto"])
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
    @Test func pythonBytesMatchSwiftBothWays() throws {
        guard let generated = try generatePythonModules() else { return }
        defer { try? FileManager.default.removeItem(at: generated) }

        let encoded = try python(["Tests/Interop/golden.py", "encode", "--gen", generated.path])
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

    @Test func pythonParsesSwiftBytes() throws {
        guard let generated = try generatePythonModules() else { return }
        defer { try? FileManager.default.removeItem(at: generated) }

        var swiftHex: [String: String] = [:]
        for (name, golden) in goldenMessages where golden.swiftEncodes {
            swiftHex[name] = hex(try golden.encode())
        }
        let input = try JSONEncoder().encode(swiftHex)
        let checked = try python(["Tests/Interop/golden.py", "check", "--gen", generated.path], stdin: input)
        #expect(checked.status == 0, "golden.py check failed:\n\(checked.stdout)\(checked.stderr)")
        #expect(checked.stdout.contains("0 mismatches"))
    }
}
