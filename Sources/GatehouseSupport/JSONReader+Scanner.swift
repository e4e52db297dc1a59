// The scanner under every `JSONReader` entry point.
extension JSONReader {
    /// A recursive-descent reader over UTF-8 bytes; every error names the byte offset where
    /// reading stopped.
    struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        let options: Options
        /// Whether values are built; when false each is read (checked) and `.null` stands for it.
        var keepsValues = true
        var index = 0

        /// A scanner at the start of `bytes`, nothing checked.
        init(unchecked bytes: UnsafeBufferPointer<UInt8>, options: Options) {
            self.bytes = bytes
            self.options = options
        }

        /// A scanner at the top-level value: size checked, byte order mark and whitespace
        /// skipped, the top-level value's kind checked.
        init(_ bytes: UnsafeBufferPointer<UInt8>, options: Options) throws(JSONTree.SyntaxError) {
            self.init(unchecked: bytes, options: options)
            if let limit = options.maxBytes, bytes.count > limit {
                index = limit
                throw error(.larger(limit))
            }
            if options.byteOrderMark, bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { index = 3 }
            skipWhitespace()
            if !options.topLevelScalars, peek != UInt8(ascii: "{"), peek != UInt8(ascii: "[") {
                throw error(.expectedObjectOrArray)
            }
        }

        func error(_ problem: JSONTree.SyntaxError.Problem) -> JSONTree.SyntaxError { JSONTree.SyntaxError(problem: problem, offset: index) }

        var atEnd: Bool { index == bytes.count }

        var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

        /// Whitespace, then the end of the text.
        mutating func end() throws(JSONTree.SyntaxError) {
            skipWhitespace()
            guard atEnd else { throw error(.textAfterValue) }
        }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        /// Moves past `byte` if it is next.
        mutating func take(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        mutating func literal(_ word: StaticString) throws(JSONTree.SyntaxError) {
            let count = word.utf8CodeUnitCount
            guard bytes.count - index >= count else { throw error(.expectedLiteral(word.utf8Start[0])) }
            for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { throw error(.expectedLiteral(word.utf8Start[0])) }
            index += count
        }

        /// A flat object of strings and nulls (`JSONReader.flatStrings`), nil for another shape.
        mutating func flatStrings(maxMembers: Int) throws(JSONTree.SyntaxError) -> [String: String?]? {
            skipWhitespace()
            guard take(UInt8(ascii: "{")) else { return nil }
            var members: [String: String?] = [:]
            skipWhitespace()
            if !take(UInt8(ascii: "}")) {
                while true {
                    skipWhitespace()
                    guard peek == UInt8(ascii: "\"") else { return nil }
                    let name = try string()
                    skipWhitespace()
                    guard take(UInt8(ascii: ":")) else { return nil }
                    skipWhitespace()
                    let value: String?
                    switch peek {
                    case UInt8(ascii: "\""): value = try string()
                    case UInt8(ascii: "n"):
                        try literal("null")
                        value = nil
                    default: return nil
                    }
                    guard members.updateValue(value, forKey: name) == nil, members.count <= maxMembers else { return nil }
                    skipWhitespace()
                    if take(UInt8(ascii: ",")) { continue }
                    guard take(UInt8(ascii: "}")) else { return nil }
                    break
                }
            }
            skipWhitespace()
            return atEnd ? members : nil
        }

        /// The value at `index`, inside `depth` arrays and objects.
        mutating func value(depth: Int) throws(JSONTree.SyntaxError) -> JSONTree {
            guard let b = peek else { throw error(.expectedValue) }
            switch b {
            case UInt8(ascii: "{"):
                var ranges: [Range<Int>]? = nil
                return try object(depth: depth + 1, ranges: &ranges)
            case UInt8(ascii: "["): return try array(depth: depth + 1)
            case UInt8(ascii: "\""):
                let text = try string()
                return keepsValues ? .string(text) : .null
            case UInt8(ascii: "t"):
                try literal("true")
                return .bool(true)
            case UInt8(ascii: "f"):
                try literal("false")
                return .bool(false)
            case UInt8(ascii: "n"):
                try literal("null")
                return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                let start = index
                try skipNumber()
                guard keepsValues else { return .null }
                return .number(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self))
            default: throw error(.expectedValue)
            }
        }

        /// The object at `index` (`{`); when `ranges` is not nil, the byte range of each
        /// member's value is appended to it, in the order of the members returned.
        mutating func object(depth: Int, ranges: inout [Range<Int>]?) throws(JSONTree.SyntaxError) -> JSONTree {
            guard depth <= options.maxDepth else { throw error(.nestedDeeper(options.maxDepth)) }
            index += 1
            var members: [JSONMember] = []
            // Names to positions, once there are enough members for a table to beat a scan.
            var positions: [String: Int] = [:]
            skipWhitespace()
            if take(UInt8(ascii: "}")) { return .object(members) }
            while true {
                skipWhitespace()
                guard peek == UInt8(ascii: "\"") else { throw error(.expectedMemberName) }
                let nameOffset = index
                let name = try string()
                skipWhitespace()
                guard take(UInt8(ascii: ":")) else { throw error(.expectedColon) }
                skipWhitespace()
                let start = index
                let value = try value(depth: depth)
                // A value not kept, in an object whose names do not matter: nothing to store.
                let stores = keepsValues || ranges != nil || options.repeatedNames == .refused
                let at: Int?
                if !stores {
                    at = nil
                } else if members.count < 8 {
                    at = members.firstIndex { $0.name == name }
                } else {
                    if positions.isEmpty { for (i, member) in members.enumerated() { positions[member.name] = i } }
                    at = positions[name]
                }
                if let at {
                    guard options.repeatedNames == .lastWins else {
                        index = nameOffset
                        throw error(.repeatedName)
                    }
                    members[at].value = value
                    ranges?[at] = start..<index
                } else if stores {
                    if !positions.isEmpty { positions[name] = members.count }
                    members.append(JSONMember(name: name, value: value))
                    ranges?.append(start..<index)
                }
                if try closesAfterItem(UInt8(ascii: "}"), else: .expectedCommaOrBrace) { return .object(members) }
            }
        }

        mutating func array(depth: Int) throws(JSONTree.SyntaxError) -> JSONTree {
            guard depth <= options.maxDepth else { throw error(.nestedDeeper(options.maxDepth)) }
            index += 1
            var values: [JSONTree] = []
            skipWhitespace()
            if take(UInt8(ascii: "]")) { return .array(values) }
            while true {
                skipWhitespace()
                let value = try value(depth: depth)
                if keepsValues { values.append(value) }
                if try closesAfterItem(UInt8(ascii: "]"), else: .expectedCommaOrBracket) { return .array(values) }
            }
        }

        /// After an object's member or an array's element: moves past whitespace and `,` (and, when
        /// trailing commas are allowed, a `close` right after it) or past `close`. True when `close`
        /// ended the container; `problem` when neither follows.
        @inline(__always)
        mutating func closesAfterItem(_ close: UInt8, else problem: JSONTree.SyntaxError.Problem) throws(JSONTree.SyntaxError) -> Bool {
            skipWhitespace()
            switch peek {
            case UInt8(ascii: ","):
                index += 1
                guard options.trailingCommas else { return false }
                skipWhitespace()
                return take(close)
            case close:
                index += 1
                return true
            default: throw error(problem)
            }
        }

        /// Moves past `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
        mutating func skipNumber() throws(JSONTree.SyntaxError) {
            _ = take(UInt8(ascii: "-"))
            if take(UInt8(ascii: "0")) {
            } else if digits() == 0 {
                throw error(.expectedDigit)
            }
            if take(UInt8(ascii: ".")) {
                guard digits() > 0 else { throw error(.expectedFractionDigit) }
            }
            if take(UInt8(ascii: "e")) || take(UInt8(ascii: "E")) {
                if !take(UInt8(ascii: "+")) { _ = take(UInt8(ascii: "-")) }
                guard digits() > 0 else { throw error(.expectedExponentDigit) }
            }
        }

        /// Moves past decimal digits; how many.
        mutating func digits() -> Int {
            let start = index
            while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") { index += 1 }
            return index - start
        }

        /// The string at `index` (`"`), escapes decoded.
        mutating func string() throws(JSONTree.SyntaxError) -> String {
            index += 1  // the opening quote
            let start = index
            // The common case: no escape, straight from the bytes.
            while index < bytes.count {
                let b = bytes[index]
                if b == UInt8(ascii: "\"") {
                    guard let text = String(validating: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self) else {
                        throw error(.invalidUTF8)
                    }
                    index += 1
                    return text
                }
                if b == UInt8(ascii: "\\") { break }
                guard b >= 0x20 else { throw error(.controlCharacter) }
                index += 1
            }
            guard index < bytes.count else { throw error(.unterminatedString) }
            var out = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
            while true {
                guard let b = peek else { throw error(.unterminatedString) }
                switch b {
                case UInt8(ascii: "\""):
                    guard let text = String(validating: out, as: UTF8.self) else { throw error(.invalidUTF8) }
                    index += 1
                    return text
                case UInt8(ascii: "\\"):
                    index += 1
                    guard let escape = peek else { throw error(.unterminatedEscape) }
                    index += 1
                    if let byte = JSONEscape.byte(after: escape) {
                        out.append(byte)
                    } else if escape == UInt8(ascii: "u") {
                        var scalar = try hex4()
                        if (0xD800..<0xDC00).contains(scalar) {
                            // A high surrogate must be followed by an escaped low one.
                            guard peek == UInt8(ascii: "\\"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "u") else {
                                throw error(.loneSurrogate)
                            }
                            index += 2
                            let low = try hex4()
                            guard (0xDC00..<0xE000).contains(low) else { throw error(.loneSurrogate) }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let unicode = Unicode.Scalar(scalar) else { throw error(.loneSurrogate) }
                        out.append(contentsOf: UTF8.encode(unicode)!)
                    } else {
                        throw error(.unknownEscape)
                    }
                case 0..<0x20:
                    throw error(.controlCharacter)
                default:
                    out.append(b)
                    index += 1
                }
            }
        }

        mutating func hex4() throws(JSONTree.SyntaxError) -> UInt32 {
            guard bytes.count - index >= 4 else { throw error(.expectedFourHexDigits) }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let b = bytes[index]
                let digit: UInt8
                switch b {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = b - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = b - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = b - UInt8(ascii: "A") + 10
                default: throw error(.expectedHexDigit)
                }
                value = value << 4 | UInt32(digit)
                index += 1
            }
            return value
        }
    }
}
