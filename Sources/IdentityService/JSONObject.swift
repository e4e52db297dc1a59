import Foundation

/// JSON object checks shared by the handlers and the in-memory store (GatehouseTestSupport).
public enum JSONObject {
    /// Whether `text` is a JSON object (`{...}`).
    public static func isObject(_ text: String) -> Bool {
        guard let data = text.data(using: .utf8),
            let value = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        else { return false }
        return value is [String: Any]
    }
}
