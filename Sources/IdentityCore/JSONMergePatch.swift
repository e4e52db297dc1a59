import Foundation

/// JSON Merge Patch (RFC 7396), the semantics of `PATCH /v1/me`'s `settings`: a member set to
/// `null` is removed, an object merges into the target's member recursively, any other value
/// (arrays included) replaces it. Members the patch does not name keep their value and place.
public enum JSONMergePatch {
    /// `patch` applied to `target` (RFC 7396 §2, `MergePatch(Target, Patch)`).
    public static func apply(_ patch: JSONTree, to target: JSONTree) -> JSONTree {
        guard case .object(let changes) = patch else { return patch }
        var members = target.members ?? []
        for change in changes {
            let at = members.firstIndex { $0.name == change.name }
            if change.value == .null {
                if let at { members.remove(at: at) }
            } else if let at {
                members[at].value = apply(change.value, to: members[at].value)
            } else {
                members.append(JSONMember(name: change.name, value: apply(change.value, to: .null)))
            }
        }
        return .object(members)
    }

    /// The JSON text of `patch` applied to the JSON text `target`; throws when either is not JSON.
    public static func apply(_ patch: String, to target: String) throws(JSONTree.SyntaxError) -> String {
        apply(try JSONTree(parsing: patch), to: try JSONTree(parsing: target)).text
    }
}
