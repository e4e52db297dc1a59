import Foundation

/// The claims of a notification's JWS; a claim of the wrong type reads as absent.
struct NotificationClaims: Decodable {
    var iss: String?
    var aud: [String]?
    var iat: Double?
    var exp: Double?
    var jti: String?
    /// `events`: a JSON object, or a string holding one (Apple sends the latter).
    var events: NotificationEvent?

    enum CodingKeys: String, CodingKey {
        case iss, aud, iat, exp, jti, events
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        iss = try? container.decodeIfPresent(String.self, forKey: .iss)
        if let single = try? container.decodeIfPresent(String.self, forKey: .aud) {
            aud = [single]
        } else {
            aud = try? container.decodeIfPresent([String].self, forKey: .aud)
        }
        iat = ClaimReading.number(container, .iat)
        exp = ClaimReading.number(container, .exp)
        jti = try? container.decodeIfPresent(String.self, forKey: .jti)
        if let text = try? container.decodeIfPresent(String.self, forKey: .events) {
            events = try? JSONDecoder().decode(NotificationEvent.self, from: Data(text.utf8))
        } else {
            events = try? container.decodeIfPresent(NotificationEvent.self, forKey: .events)
        }
    }
}

/// The event inside `events`.
struct NotificationEvent: Decodable {
    var type: String?
    var sub: String?
    var email: String?
    var isPrivateEmail: Bool?
    /// Milliseconds since 1970 (a number, or a string of digits).
    var eventTime: Double?

    enum CodingKeys: String, CodingKey {
        case type, sub, email
        case isPrivateEmail = "is_private_email"
        case eventTime = "event_time"
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        type = try? container.decodeIfPresent(String.self, forKey: .type)
        sub = try? container.decodeIfPresent(String.self, forKey: .sub)
        email = try? container.decodeIfPresent(String.self, forKey: .email)
        isPrivateEmail = ClaimReading.flag(container, .isPrivateEmail)
        if let text = try? container.decodeIfPresent(String.self, forKey: .eventTime) {
            eventTime = Double(text).flatMap { $0.isFinite ? $0 : nil }
        } else {
            eventTime = ClaimReading.number(container, .eventTime)
        }
    }
}
