// Running python3 and grpc_tools' protoc for the interop tests, and hex for the JSON they
// exchange with the scripts of Tests/Interop. Needs python3 with grpcio-tools and protobuf
// (scripts/setup installs them).
import Foundation
import GatehouseTestSupport
import Testing

/// Runs `python3 arguments…` in the repository root, writing `stdin` to it, without blocking a
/// cooperative thread while it runs.
func python(_ arguments: [String], stdin: Data? = nil) async throws -> ProcessResult {
    try await runProcess(URL(fileURLWithPath: "/usr/bin/env"), ["python3"] + arguments, stdin: stdin, in: BuiltProducts.packageRoot)
}

/// Generates the `*_pb2.py` modules of `protos` (paths relative to the repository root, all under
/// `proto/`) into a fresh temporary directory; nil, with a recorded issue, when python3 or
/// grpc_tools is missing or protoc fails. The caller removes the directory.
func generatePythonModules(_ protos: [String] = ["proto/testing.proto"]) async throws -> URL? {
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
    let protoc = try await python(["-m", "grpc_tools.protoc", "-I", "proto", "--python_out=\(directory.path)"] + protos)
    guard protoc.status == 0 else {
        Issue.record("protoc failed: \(protoc.stderr)")
        try? FileManager.default.removeItem(at: directory)
        return nil
    }
    return directory
}

/// Lowercase hex of `bytes`, two digits a byte.
func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

/// The bytes of a hex string; nil when it has an odd length or a non-hex digit.
func bytes(hex: String) -> [UInt8]? {
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
