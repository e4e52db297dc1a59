import Foundation
import Testing
import TokenCore

@Suite("Base64URL (token encoding)")
struct Base64URLTests {
    @Test("encodes like Foundation's base64 with the URL alphabet and no padding, appending to what is there")
    func encodesLikeFoundation() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let expected = Data(bytes).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            #expect(Base64URL.encode(bytes) == expected)
            #expect(Base64URL.encode(Data(bytes)) == expected)
            // A non-contiguous collection takes the copying path.
            #expect(Base64URL.encode(DispatchData.from(bytes)) == expected)
            var out = Array("prefix.".utf8)
            Base64URL.append(bytes, to: &out)
            #expect(String(decoding: out, as: UTF8.self) == "prefix." + expected)
            #expect(Base64URL.decode(expected) == Data(bytes))
        }
    }
}

extension DispatchData {
    /// `bytes` in two regions, so the collection is not contiguous.
    static func from(_ bytes: [UInt8]) -> DispatchData {
        var data = DispatchData.empty
        let half = bytes.count / 2
        bytes[..<half].withUnsafeBytes { data.append($0) }
        bytes[half...].withUnsafeBytes { data.append($0) }
        return data
    }
}
