import Foundation
import GatehouseSupport

/// JSON Merge Patch (RFC 7396), the semantics of `PATCH /v1/me`'s `settings`: a member set to
/// `null` is removed, an object merges into the target's member recursively, any other value
/// (arrays included) replaces it. Members the patch does not name keep their value and place.
///
/// Linear in the size of target and patch: each object level builds one index from member name
/// to position. Names compare as Swift `String`s do (canonical equivalence), as in `JSONTree`'s
/// reader. Repeated names, which `JSONTree(parsing:)` never produces but a tree built in code
/// may hold, are read the way that reader reads them: in the target, the last value wins, at
/// the place of the first occurrence (the later ones are dropped); in the patch, the changes
/// apply in order, so the last one wins as well. The result never repeats a name.
public enum JSONMergePatch {
    /// `patch` applied to `target` (RFC 7396 §2, `MergePatch(Target, Patch)`).
    public static func apply(_ patch: JSONTree, to target: JSONTree) -> JSONTree {
        guard case .object(let changes) = patch else { return patch }
        // Slots of the result in order; a removed member leaves nil, compacted at the end.
        var slots: [JSONMember?] = []
        var positions: [String: Int] = [:]
        for member in target.members ?? [] {
            if let at = positions[member.name] {
                slots[at]?.value = member.value
            } else {
                positions[member.name] = slots.count
                slots.append(member)
            }
        }
        for change in changes {
            let at = positions[change.name]
            if change.value == .null {
                if let at {
                    slots[at] = nil
                    positions[change.name] = nil
                }
            } else if let at, let current = slots[at] {
                slots[at] = JSONMember(name: current.name, value: apply(change.value, to: current.value))
            } else {
                positions[change.name] = slots.count
                slots.append(JSONMember(name: change.name, value: apply(change.value, to: .null)))
            }
        }
        return .object(slots.compactMap { $0 })
    }

    /// The JSON text of `patch` applied to the JSON text `target`; throws when either is not JSON.
    public static func apply(_ patch: String, to target: String) throws(JSONTree.SyntaxError) -> String {
        apply(try JSONTree(parsing: patch), to: try JSONTree(parsing: target)).text
    }
}
