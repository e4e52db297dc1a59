/// A store shared by several instances picks one of them to run each background job (a sweep, a mail delivery pass):
/// the others skip it. The lead is held while the job runs and released after it, or when the
/// process holding it dies (PostgreSQL: a session advisory lock, gone with its connection).
public protocol LeaderElection: Sendable {
    /// Runs `body` if this instance takes the lead of `job` (no other instance runs it now);
    /// whether it ran.
    func runIfLeader(_ job: String, _ body: @escaping @Sendable () async throws -> Void) async throws -> Bool
}
