extension PasswordStrength {
    /// Three levels for a strength meter (seed 001 draws three bars), from the guessability score
    /// and the policy: a password the policy refuses is `weak` whatever its score.
    public enum Level: String, Sendable, CaseIterable {
        /// Not acceptable, or score 0–1: guessable.
        case weak
        /// Score 2–3.
        case medium
        /// Score 4.
        case strong

        /// The level of `score` (0…4) for a password the policy accepts (`acceptable`) or not.
        public init(score: Int, acceptable: Bool) {
            switch score {
            case _ where !acceptable: self = .weak
            case ...1: self = .weak
            case 2...3: self = .medium
            default: self = .strong
            }
        }
    }
}
