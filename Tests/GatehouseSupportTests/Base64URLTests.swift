import Foundation
import Testing
import GatehouseSupport

@Suite("Base64URL")
struct Base64URLTests {
    /// Foundation's base64 with the URL alphabet and no padding: the reference.
    static func reference(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    @Test("encodes like Foundation's base64 with the URL alphabet, and decodes back, at every length 0…200")
    func roundTrip() {
        var generator = SystemRandomNumberGenerator()
        for length in 0...200 {
            let data = Data((0..<length).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
            let encoded = Base64URL.encode(data)
            #expect(encoded == Self.reference(data), "length \(length)")
            #expect(Base64URL.decode(encoded) == data, "length \(length)")
        }
        #expect(Base64URL.encode(Data([0xFB, 0xFF])) == "-_8")
    }

    @Test("refuses padding, the standard alphabet, whitespace, impossible lengths and non-canonical trailing bits")
    func refusesMalformed() {
        for bad in ["QQ==", "+/8", "ab cd", "abcde", "QR", "QUK", "é", "A\n"] {
            #expect(Base64URL.decode(bad) == nil, "\(bad)")
        }
        #expect(Base64URL.decode("QQ") == Data([0x41]))
        #expect(Base64URL.decode("QUI") == Data([0x41, 0x42]))
        #expect(Base64URL.decode("") == Data())
    }

    @Test("appends to what is in the buffer; contiguous and non-contiguous inputs alike")
    func appendsAndTakesAnyCollection() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let expected = Self.reference(Data(bytes))
            #expect(Base64URL.encode(bytes) == expected)
            // DispatchData in two regions is not contiguous: the copying path.
            #expect(Base64URL.encode(DispatchData.twoRegions(bytes)) == expected)
            var out = Array("prefix.".utf8)
            Base64URL.append(bytes, to: &out)
            #expect(String(decoding: out, as: UTF8.self) == "prefix." + expected)
        }
    }
}

extension DispatchData {
    /// `bytes` in two regions, so the collection is not contiguous.
    static func twoRegions(_ bytes: [UInt8]) -> DispatchData {
        var data = DispatchData.empty
        let half = bytes.count / 2
        bytes[..<half].withUnsafeBytes { data.append($0) }
        bytes[half...].withUnsafeBytes { data.append($0) }
        return data
    }
}
