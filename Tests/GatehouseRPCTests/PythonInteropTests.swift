import Foundation
import GatehouseContracts
import GatehouseRPC
import Testing
import GatehouseTestSupport
import RPCRouting

/// The repository root, found from this file's path.
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// Runs a command and returns its exit status and standard output.
func run(_ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
    let result = try runProcessSync(URL(fileURLWithPath: "/usr/bin/env"), arguments)
    return (result.status, result.stdout, result.stderr)
}

/// Compiles every proto/*.proto with a stock protoc (grpcio-tools) into a temporary folder.
func compileProtos() throws -> URL {
    let out = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-proto-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
    let protoDir = repositoryRoot.appendingPathComponent("proto")
    let files = try FileManager.default.contentsOfDirectory(atPath: protoDir.path).filter { $0.hasSuffix(".proto") }.sorted()
    let result = try run(["python3", "-m", "grpc_tools.protoc", "-I", protoDir.path, "--python_out=\(out.path)"] + files)
    guard result.status == 0 else {
        throw RPCError(.internal, "protoc failed (run scripts/setup to install grpcio-tools): \(result.error)")
    }
    return out
}

@Suite("Python interop over ZeroMQ")
struct PythonInteropTests {
    @Test("a pyzmq client with envelopes built from proto/ calls a Swift RPC server")
    func pythonCallsSwift() async throws {
        var router = RPCRouter()
        router.register(TestAPI.echo) { ping, _ in Pong(text: ping.text) }
        let server = try RPCServer(router: router, configuration: .init(endpoints: ["tcp://127.0.0.1:0"]))
        let endpoint = try server.start()[0]
        let generated = try compileProtos()
        let script = repositoryRoot.appendingPathComponent("Tests/Interop/rpc_client.py").path
        let result = try await Task.detached { try run(["python3", script, generated.path, endpoint]) }.value
        #expect(result.status == 0, "python client: \(result.output) \(result.error)")
        let json = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any]
        #expect(json?["echo"] as? String == "hello from python ✓")
        #expect(json?["unknown"] as? String == "unimplemented")
        #expect(json?["version"] as? String == "unsupported_version")
        #expect(json?["malformed"] as? String == "malformed_request")
        #expect(json?["bad_body"] as? String == "malformed_request")
        #expect(json?["again"] as? String == "again")
        server.stop()
        await server.waitUntilStopped()
    }
}
