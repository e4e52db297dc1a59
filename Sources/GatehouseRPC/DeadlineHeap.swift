/// A min-heap of (deadline, request id), so the I/O thread finds expired calls without scanning.
struct DeadlineHeap {
    private var items: [(deadline: ContinuousClock.Instant, id: UInt64)] = []

    var isEmpty: Bool { items.isEmpty }
    var earliest: ContinuousClock.Instant? { items.first?.deadline }

    mutating func insert(_ deadline: ContinuousClock.Instant, _ id: UInt64) {
        items.append((deadline, id))
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child].deadline < items[parent].deadline else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    /// The request id of the earliest entry.
    var earliestID: UInt64? { items.first?.id }

    /// The earliest deadline among the entries whose id passes `include` (a scan: for rare events).
    func earliest(where include: (UInt64) -> Bool) -> ContinuousClock.Instant? {
        var earliest: ContinuousClock.Instant?
        for item in items where include(item.id) {
            if earliest.map({ item.deadline < $0 }) ?? true { earliest = item.deadline }
        }
        return earliest
    }

    /// Removes the earliest entry whatever its deadline (its call has finished).
    mutating func removeEarliest() {
        guard let first = items.first else { return }
        _ = popExpired(now: first.deadline)
    }

    /// Removes and returns the earliest entry if its deadline is at or before `now`.
    mutating func popExpired(now: ContinuousClock.Instant) -> UInt64? {
        guard let first = items.first, first.deadline <= now else { return nil }
        let last = items.removeLast()
        if !items.isEmpty {
            items[0] = last
            var parent = 0
            while true {
                let left = 2 * parent + 1, right = left + 1
                var smallest = parent
                if left < items.count, items[left].deadline < items[smallest].deadline { smallest = left }
                if right < items.count, items[right].deadline < items[smallest].deadline { smallest = right }
                if smallest == parent { break }
                items.swapAt(parent, smallest)
                parent = smallest
            }
        }
        return first.id
    }
}
