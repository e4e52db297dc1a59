/// The requests an `RPCServer` has accepted and not answered yet (their handlers run as tasks),
/// so that shutdown can answer every one of them. Owned by the server's I/O thread.
///
/// A request gets a slot when its task is started; the slot number travels with the task and
/// comes back with its reply, which is sent to the slot's peer and frees the slot. Slots are
/// reused (a free list), so after warm-up accepting and answering allocate nothing.
struct PendingRequests {
    /// Who to answer, and the task that will.
    struct Entry {
        /// The peer's routing id (the ROUTER's first frame).
        var identity: [UInt8]
        /// The caller's request id, for an answer made here (`unavailable`).
        var requestID: UInt64
        /// The task running the handler, once started.
        var task: Task<Void, Never>?
    }

    private var entries: [Entry?] = []
    private var free: [Int] = []
    /// Requests accepted and not answered.
    private(set) var count = 0

    /// Whether every accepted request has been answered.
    var isEmpty: Bool { count == 0 }

    /// Takes a slot for a request from peer `identity`.
    mutating func insert(identity: [UInt8], requestID: UInt64) -> Int {
        count += 1
        let entry = Entry(identity: identity, requestID: requestID, task: nil)
        if let slot = free.popLast() {
            entries[slot] = entry
            return slot
        }
        entries.append(entry)
        return entries.count - 1
    }

    /// Records the task serving `slot` (to cancel it if the request is given up).
    mutating func attach(_ task: Task<Void, Never>, to slot: Int) {
        entries[slot]?.task = task
    }

    /// Frees `slot`; returns its entry, or nil when it was already answered.
    mutating func remove(_ slot: Int) -> Entry? {
        guard slot >= 0, slot < entries.count, let entry = entries[slot] else { return nil }
        entries[slot] = nil
        free.append(slot)
        count -= 1
        return entry
    }

    /// Frees every slot; returns the entries that were still waiting.
    mutating func removeAll() -> [Entry] {
        let waiting = entries.compactMap { $0 }
        entries.removeAll()
        free.removeAll()
        count = 0
        return waiting
    }
}
