import Foundation
import GatehouseContracts
import HTTPTypes
import Hummingbird
import Testing

@testable import Gateway
import GatehouseSupport

/// The hand-written pieces on every request's path: they must agree with what they replaced.
@Suite struct HotPathTests {
    @Test(arguments: [
        ("application/json", true),
        ("application/json; charset=utf-8", true),
        ("  Application/JSON ;charset=utf-8", true),
        ("APPLICATION/JSON", true),
        ("application/problem+json", true),
        ("application/vnd.api+json; q=1", true),
        ("application/json\t", true),
        ("application/+json", false),
        ("text/json", false),
        ("application/jsonx", false),
        ("application/xml", false),
        ("text/plain", false),
        ("", false),
        (";application/json", false),
        ("application/json-patch", false),
        ("applicationXjson", false),
    ])
    func contentTypes(value: String, isJSON: Bool) {
        #expect(Request.isJSON(value) == isJSON, "\(value)")
    }

    @Test func requestIDsAreUniqueHexWithAProcessPrefix() {
        let ids = (0..<10_000).map { _ in RequestIDs.generate() }
        #expect(Set(ids).count == ids.count)
        for id in ids.prefix(100) {
            #expect(id.utf8.count == 32)
            #expect(id.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) })
            // A generated id is acceptable as an incoming one too.
            #expect(RequestIDs.accept(id) == id)
        }
        #expect(Set(ids.map { $0.prefix(16) }).count == 1)
        // The counter part counts up.
        let a = UInt64(ids[0].suffix(16), radix: 16)!
        let b = UInt64(ids[1].suffix(16), radix: 16)!
        #expect(b == a + 1)
    }

    @Test func jsonObjectWriterMatchesJSONSerialization() throws {
        var w = JSONObjectWriter()
        w.string("plain", "ada@example.com")
        w.string("escapes", "quote \" backslash \\ newline \n return \r tab \t bell \u{7} nul \u{0} é 🙂")
        w.string("absent", nil)
        w.int("zero", 0)
        w.int("negative", -1_234_567)
        w.int("max", Int.max)
        w.int("min", Int.min)
        w.bool("yes", true)
        w.bool("no", false)
        w.strings("list", ["a", "b\"c", ""])
        w.strings("empty", [])
        w.raw("raw", Array(#"{"x":[1,2]}"#.utf8))
        let bytes = w.finish()
        let object = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        #expect(object["plain"] as? String == "ada@example.com")
        #expect(object["escapes"] as? String == "quote \" backslash \\ newline \n return \r tab \t bell \u{7} nul \u{0} é 🙂")
        #expect(object["absent"] is NSNull)
        #expect((object["zero"] as? NSNumber)?.intValue == 0)
        #expect((object["negative"] as? NSNumber)?.intValue == -1_234_567)
        #expect((object["max"] as? NSNumber)?.int64Value == Int64.max)
        #expect((object["min"] as? NSNumber)?.int64Value == Int64.min)
        #expect(object["yes"] as? Bool == true)
        #expect(object["no"] as? Bool == false)
        #expect(object["list"] as? [String] == ["a", "b\"c", ""])
        #expect(object["empty"] as? [String] == [])
        #expect((object["raw"] as? [String: Any])?["x"] as? [Int] == [1, 2])
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.hasPrefix(#"{"plain":"ada@example.com","escapes":"quote \" backslash \\ newline \n return \r tab \t bell \u0007 nul \u0000 é 🙂","absent":null,"zero":0,"negative":-1234567,"#))
        #expect(text.contains(#""max":9223372036854775807,"min":-9223372036854775808,"yes":true,"no":false,"#))
    }

    @Test func anEmptyObject() {
        #expect(JSONObjectWriter().finish() == Array("{}".utf8))
    }

    @Test func metricLabelsForMethodsAreBounded() {
        #expect(EdgeMiddleware.metricMethod(.get) == "GET")
        #expect(EdgeMiddleware.metricMethod(.patch) == "PATCH")
        #expect(EdgeMiddleware.metricMethod(HTTPRequest.Method("BREW")!) == "other")
        #expect(EdgeMiddleware.metricMethod(HTTPRequest.Method("PROPFIND")!) == "other")
    }

    @Test func metricObjectsAreReusedPerLabelSet() {
        let metrics = GatewayMetrics()
        for _ in 0..<3 { metrics.recordRequest(route: "/v1/me", method: "GET", status: 200, duration: .milliseconds(3)) }
        metrics.recordRequest(route: "/v1/me", method: "GET", status: 401, duration: .milliseconds(1))
        for _ in 0..<2 { metrics.recordRPC(service: "token", method: "token.refresh", code: "ok", duration: .microseconds(300)) }
        let text = String(decoding: metrics.render(), as: UTF8.self)
        #expect(text.contains(#"gatehouse_http_requests_total{route="/v1/me",method="GET",status="200"} 3"#), "\(text)")
        #expect(text.contains(#"gatehouse_http_requests_total{route="/v1/me",method="GET",status="401"} 1"#))
        #expect(text.contains(#"gatehouse_rpc_call_duration_seconds_count{service="token",method="token.refresh",code="ok"} 2"#))
    }

    @Test(arguments: [
        #"{"refreshToken":"abc"}"#,
        #" { "email" : "a@b.c" , "password":"p\"w\\d\/x" } "#,
        #"{"displayName":null,"email":"x"}"#,
        #"{}"#,
        #"{"u":"\u00e9\u4e2d\ud83d\ude42 \b\f\n\r\t"}"#,
        "{\"raw\":\"é中🙂\"}",
    ])
    func flatObjectsMatchJSONSerialization(text: String) throws {
        let parsed = try #require(JSONReader.flatStrings(Array(text.utf8)), "\(text)")
        let reference = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(parsed.count == reference.count)
        for (key, value) in reference {
            if value is NSNull {
                #expect(parsed[key] == .some(nil), "\(key)")
            } else {
                #expect(parsed[key] == .some(value as? String), "\(key)")
            }
        }
    }

    /// Anything but a flat object of strings goes to `JSONDecoder` (nil here).
    @Test(arguments: [
        #"{"a":1}"#, #"{"a":true}"#, #"{"a":{"b":"c"}}"#, #"{"a":["b"]}"#, #"["a"]"#, #""a""#, #"{"a":"b"} x"#,
        #"{"a":"b",}"#, #"{"a":"b""#, #"{"a" "b"}"#, #"{a:"b"}"#, #"{"a":"b","a":"c"}"#, #"{"a":"\ud83d"}"#,
        #"{"a":"\ude42"}"#, #"{"a":"\x"}"#, #"{"a":"\u12"}"#, "{\"a\":\"tab\there\"}", #"{"a":nul}"#, "",
    ])
    func otherShapesFallBack(text: String) {
        #expect(JSONReader.flatStrings(Array(text.utf8)) == nil, "\(text)")
    }

    @Test func invalidUTF8FallsBack() {
        #expect(JSONReader.flatStrings([0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0xFF, 0x22, 0x7D]) == nil)
        #expect(JSONReader.flatStrings([0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0x5C, 0x6E, 0xC3, 0x22, 0x7D]) == nil)
    }

    @Test func iso8601MatchesFoundation() {
        var generator = SystemRandomNumberGenerator()
        var dates = [0, 1_700_000_000.123, -1.5, 951_782_400, 4_102_444_800, 253_402_300_799.999, -62_135_596_800, 86_399.9999]
            .map(Date.init(timeIntervalSince1970:))
        for _ in 0..<5_000 {
            dates.append(Date(timeIntervalSince1970: Double.random(in: -62_135_596_800..<253_402_300_800, using: &generator)))
        }
        for date in dates {
            #expect(ISO8601.format(date) == date.formatted(.iso8601), "\(date.timeIntervalSince1970)")
        }
    }

    @Test func userViewIsBuiltFromTheContractInOnePlace() throws {
        let user = User(
            id: "u1", email: "ada@example.com", displayName: "", photoURL: "https://x.example/a.png",
            createdAt: Date(timeIntervalSince1970: 1_700_000_000), settingsJSON: #" {"theme":"dark","n":1.50} "#)
        let text = String(decoding: user.publicView, as: UTF8.self)
        // Raw settings JSON is written byte for byte (note `1.50`), trimmed of whitespace.
        #expect(text.contains(#""settings":{"theme":"dark","n":1.50}"#))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(user.publicView)) as? [String: Any])
        #expect(object["displayName"] is NSNull)
        #expect(object["photoURL"] as? String == "https://x.example/a.png")
        #expect(object["lastSignInAt"] is NSNull)
        #expect(object["createdAt"] as? String == "2023-11-14T22:13:20Z")
        #expect(Set(object.keys) == [
            "id", "email", "emailVerified", "displayName", "photoURL", "isAnonymous", "providers", "createdAt", "lastSignInAt", "settings",
        ])
    }

    /// One view per audience: the admin view starts with the public view's identity members (one
    /// writer for both), then its own; it never carries settings, the public one never claims.
    @Test func adminViewSharesTheIdentityMembersOfThePublicView() throws {
        let user = User(
            id: "u1", email: "", displayName: "Ada", photoURL: "", createdAt: Date(timeIntervalSince1970: 1_700_000_000),
            settingsJSON: #"{"theme":"dark"}"#)
        let admin = String(decoding: AdminUser(user: user, customClaimsJSON: #"{"role":"x"}"#, updatedAt: user.createdAt).adminView, as: UTF8.self)
        let identity = #"{"id":"u1","email":null,"emailVerified":false,"displayName":"Ada","photoURL":null,"isAnonymous":false,"#
        #expect(String(decoding: user.publicView, as: UTF8.self).hasPrefix(identity + #""providers":"#))
        #expect(admin.hasPrefix(identity + #""disabled":false,"providers":[],"customClaims":{"role":"x"},"#))
        #expect(!admin.contains("settings"))
        #expect(!String(decoding: user.publicView, as: UTF8.self).contains("customClaims"))
    }

    @Test func settingsAreTrimmedOfJSONWhitespace() {
        #expect(User.trimmedJSON(" \n\t{\"a\":1}\r\n ") == Array(#"{"a":1}"#.utf8))
        #expect(User.trimmedJSON("  ") == [])
        #expect(User.trimmedJSON("") == [])
    }

    @Test func headersOfOtherShapesStillParse() throws {
        func encode(_ json: String) -> Substring {
            Substring(Data(json.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: ""))
        }
        #expect(BearerVerifier.algorithmAndKeyID(encode(#"{"alg":"ES256","typ":"JWT","kid":"k1"}"#)) ?? ("", "") == ("ES256", "k1"))
        // A non-string member: the general parser.
        #expect(BearerVerifier.algorithmAndKeyID(encode(#"{"alg":"ES256","kid":"k2","crit":["x"]}"#)) ?? ("", "") == ("ES256", "k2"))
        #expect(BearerVerifier.algorithmAndKeyID(encode(#"{"alg":"ES256"}"#)) == nil)
        #expect(BearerVerifier.algorithmAndKeyID(encode(#"{"alg":null,"kid":"k"}"#)) == nil)
        #expect(BearerVerifier.algorithmAndKeyID(encode("not json")) == nil)
        #expect(BearerVerifier.algorithmAndKeyID("!!!") == nil)
    }

    @Test func bearerSchemeIsCaseInsensitive() {
        #expect(BearerVerifier.bearerToken("Bearer abc") == "abc")
        #expect(BearerVerifier.bearerToken("bEaReR  abc  ") == "abc")
        #expect(BearerVerifier.bearerToken("Basic abc") == nil)
        #expect(BearerVerifier.bearerToken("Bearerx abc") == nil)
        #expect(BearerVerifier.bearerToken("Bearer") == nil)
        #expect(BearerVerifier.bearerToken("Beare\u{0}r abc") == nil)
    }
}
