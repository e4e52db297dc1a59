// The ceiling for `GET /v1/me` in BENCHMARKS.md: a bare Hummingbird route that only verifies
// the same access token the gateway verifies (signature against the running stack's JWKS with
// jwt-kit, `exp`, `iss`, `aud`) and answers `{"sub":…}`, with no service call, no revocation
// list, no metrics or access log. Load it with
// `gatehouse-load --scenario raw-get --url http://127.0.0.1:8081 --path /me --bearer TOKEN`.
//
// Usage: gatehouse-jwt-ceiling --jwks-file jwks.json --issuer ISS [--audience gatehouse] [--port 8081]
import ArgumentParser
import Foundation
import Hummingbird
import JWTKit

struct Claims: JWTPayload {
    var sub: SubjectClaim
    var iss: IssuerClaim
    var aud: AudienceClaim
    var exp: ExpirationClaim

    func verify(using algorithm: some JWTAlgorithm) async throws {
        try exp.verifyNotExpired(currentDate: Date())
    }
}

@main
struct JWTCeiling: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gatehouse-jwt-ceiling", abstract: "A bare route that only verifies a Gatehouse access token (benchmark ceiling).")

    @Option(help: "The stack's JWKS document (curl http://127.0.0.1:8080/.well-known/jwks.json).") var jwksFile: String
    @Option(help: "The expected iss.") var issuer: String
    @Option(help: "The expected aud.") var audience: String = "gatehouse"
    @Option(help: "Port on 127.0.0.1.") var port: Int = 8081

    func run() async throws {
        let keys = JWTKeyCollection()
        let jwks = try String(contentsOfFile: jwksFile, encoding: .utf8)
        try await keys.add(jwksJSON: jwks)
        let router = Router()
        let issuer = issuer
        let audience = audience
        router.get("/me") { request, _ -> Response in
            guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else { return Response(status: .unauthorized) }
            guard let claims = try? await keys.verify(String(header.dropFirst(7)), as: Claims.self),
                claims.iss.value == issuer, claims.aud.value.contains(audience)
            else { return Response(status: .unauthorized) }
            var body = ByteBuffer()
            body.writeString(#"{"sub":""# + claims.sub.value + #""}"#)
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: body))
        }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
        try await app.runService()
    }
}
