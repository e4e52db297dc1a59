extension String {
    /// The longest prefix that fits in `bytes` UTF-8 bytes, never splitting a character (for
    /// values stored or logged with a size limit: user agents, revocation reasons).
    public func truncated(toUTF8Bytes bytes: Int) -> String {
        guard utf8.count > bytes else { return self }
        var result = ""
        var used = 0
        for character in self {
            let size = character.utf8.count
            if used + size > bytes { break }
            result.append(character)
            used += size
        }
        return result
    }
}
