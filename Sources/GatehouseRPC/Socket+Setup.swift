import ZeroMQ

// Socket setup shared by every server-side (ROUTER, PUB) and client-side (DEALER, SUB) socket.
extension Socket {
    /// Makes this socket a CURVE client of the server whose public key is in `keys`.
    func configureCurveClient(_ keys: CurveClientKeys?) throws {
        guard let keys else { return }
        try set([.curveServerKey(keys.serverPublicKey), .curvePublicKey(keys.publicKey), .curveSecretKey(keys.secretKey)])
    }

    /// Binds every endpoint (`tcp://HOST:0` picks a free port) and returns them as bound.
    func bind(all endpoints: [String]) throws -> [String] {
        try endpoints.map { endpoint in
            var resolved = endpoint
            if endpoint.hasPrefix("tcp://"), endpoint.hasSuffix(":0") { resolved = String(endpoint.dropLast(1)) + "*" }
            try bind(resolved)
            return try lastEndpoint
        }
    }
}
