import Foundation

/// Internationalized domain names for relays without SMTPUTF8: each label with a non-ASCII
/// character becomes `xn--` + its Punycode (RFC 3492), after NFC and lower-casing (the common
/// part of the IDNA mappings, UTS #46).
public enum IDNA {
    /// `domain` in ASCII (`例え.テスト` → `xn--r8jz45g.xn--zckzah`), or nil when a label is empty
    /// or longer than 63 bytes once encoded. An ASCII domain comes back as it is.
    public static func asciiDomain(_ domain: String) -> String? {
        if domain.unicodeScalars.allSatisfy(\.isASCII) { return domain }
        // The full stops IDNA treats as dots (ideographic, fullwidth, halfwidth).
        let dotted = String(String.UnicodeScalarView(domain.precomposedStringWithCanonicalMapping.lowercased().unicodeScalars.map {
            [0x3002, 0xFF0E, 0xFF61].contains($0.value) ? "." : $0
        }))
        var labels: [String] = []
        for label in dotted.split(separator: ".", omittingEmptySubsequences: false) {
            let encoded = label.unicodeScalars.allSatisfy(\.isASCII) ? String(label) : Punycode.encode(String(label)).map { "xn--" + $0 }
            guard let encoded, !encoded.isEmpty, encoded.utf8.count <= 63 else { return nil }
            labels.append(encoded)
        }
        return labels.joined(separator: ".")
    }
}

/// Punycode (RFC 3492 §6.3): a Unicode string as the ASCII letters, digits and hyphens of a
/// domain label (without the `xn--` prefix).
public enum Punycode {
    private static let base = 36, tMin = 1, tMax = 26, skew = 38, damp = 700, initialBias = 72, initialN = 128

    /// The encoding of `input`, or nil on overflow (an absurdly long label).
    public static func encode(_ input: String) -> String? {
        let scalars = input.unicodeScalars.map { Int($0.value) }
        var output = scalars.filter { $0 < 0x80 }.map { Character(Unicode.Scalar(UInt8($0))) }
        let basicCount = output.count
        var handled = basicCount
        if basicCount > 0 { output.append("-") }
        var n = initialN, delta = 0, bias = initialBias
        while handled < scalars.count {
            guard let m = scalars.filter({ $0 >= n }).min() else { break }
            let (product, overflow) = (m - n).multipliedReportingOverflow(by: handled + 1)
            guard !overflow, delta <= Int(Int32.max) - product else { return nil }
            delta += product
            n = m
            for scalar in scalars {
                if scalar < n {
                    delta += 1
                    guard delta <= Int(Int32.max) else { return nil }
                }
                guard scalar == n else { continue }
                var q = delta, k = base
                while true {
                    let t = k <= bias ? tMin : (k >= bias + tMax ? tMax : k - bias)
                    if q < t { break }
                    output.append(digit(t + (q - t) % (base - t)))
                    q = (q - t) / (base - t)
                    k += base
                }
                output.append(digit(q))
                bias = adapt(delta, handled + 1, handled == basicCount)
                delta = 0
                handled += 1
            }
            delta += 1
            n += 1
        }
        return String(output)
    }

    private static func digit(_ value: Int) -> Character {
        Character(Unicode.Scalar(UInt8(value < 26 ? 0x61 + value : 0x30 + value - 26)))
    }

    private static func adapt(_ delta: Int, _ count: Int, _ first: Bool) -> Int {
        var delta = first ? delta / damp : delta / 2
        delta += delta / count
        var k = 0
        while delta > ((base - tMin) * tMax) / 2 {
            delta /= base - tMin
            k += base
        }
        return k + (base - tMin + 1) * delta / (delta + skew)
    }
}
