// A tiny echo server for the RPC benchmarks: serves `bench.echo` through the Gatehouse RPC
// server on one endpoint and a raw libzmq ROUTER echo (the floor) on another, so the
// benchmark can measure both against a second process in the same run.
//
// usage: gatehouse-echo-server RPC_ENDPOINT RAW_ENDPOINT
import Foundation
import GatehouseContracts
import GatehouseRPC
import ZeroMQ
import RPCRouting

struct EchoMessage: Codable, Sendable {
    var text: String
    enum CodingKeys: Int, CodingKey { case text = 1 }
}

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    FileHandle.standardError.write(Data("usage: gatehouse-echo-server RPC_ENDPOINT RAW_ENDPOINT\n".utf8))
    exit(2)
}

var router = RPCRouter()
router.register(RPCMethod<EchoMessage, EchoMessage>(name: "bench.echo")) { message, _ in message }
router.registerSync(RPCMethod<EchoMessage, EchoMessage>(name: "bench.echoSync")) { message, _ in message }
let server = try RPCServer(router: router, configuration: .init(endpoints: [arguments[1]]))
try server.start()

let raw = try ZMQContext.shared.socket(.router)
try raw.set([.sendHighWaterMark(100_000), .receiveHighWaterMark(100_000)])
try raw.bind(arguments[2])
// Exit when the parent closes our standard input (it ended or was killed), so no orphan
// keeps the benchmark's pipes open.
Thread {
    while FileHandle.standardInput.availableData.count > 0 {}
    exit(0)
}.start()
print("ready")
fflush(nil)
// The raw echo runs on the main thread, which owns `raw` from here on.
while let frames = try raw.receiveMultipart() {
    try raw.send(multipart: frames)
}
