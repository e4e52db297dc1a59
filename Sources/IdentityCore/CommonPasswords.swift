/// The common-password blocklist: the 10,000 most common passwords of the zxcvbn project's list
/// (source and licence in `Resources/README.md`), compared case-insensitively.
public enum CommonPasswords {
    /// The lowercased entries, built once on first use.
    public static let set: Set<String> = {
        var set = Set<String>(minimumCapacity: 10_000)
        for word in rawList.split(whereSeparator: \.isWhitespace) { set.insert(word.lowercased()) }
        return set
    }()

    /// Whether `password` (already NFKC-normalized) is on the list, ignoring case.
    public static func contains(_ password: String) -> Bool {
        Self.set.contains(password.lowercased())
    }

    /// The number of entries.
    public static var count: Int { Self.set.count }
}
