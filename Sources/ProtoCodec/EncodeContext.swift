// Encoder state shared by all containers of one encode call: the output buffer, open nested
// messages awaiting their length, and the coding path.

final class EncodeContext {
    /// Mutable state lives behind a pointer: class stored properties would pay for a dynamic
    /// exclusivity check (a runtime call) on every access, which was ~10% of encoding time.
    /// The context is confined to one `encode` call on one thread.
    private struct State {
        var buffer: [UInt8] = []
        var path: [any CodingKey] = []
        /// Open nested messages (placeholder offset and depth), innermost last.
        var frames: [(lengthAt: Int, depth: Int)] = []
        /// Depth of the innermost open frame, 0 when none.
        var openDepth = 0
        /// Errors raised where Codable cannot throw (e.g. `nestedContainer` with a bad key).
        var deferredError: (any Error)?
    }

    private let state: UnsafeMutablePointer<State>
    let userInfo: [CodingUserInfoKey: any Sendable]

    init(capacity: Int, userInfo: [CodingUserInfoKey: any Sendable]) {
        state = UnsafeMutablePointer<State>.allocate(capacity: 1)
        state.initialize(to: State())
        state.pointee.buffer.reserveCapacity(capacity)
        self.userInfo = userInfo
    }

    deinit {
        state.deinitialize(count: 1)
        state.deallocate()
    }

    var buffer: [UInt8] {
        _read { yield state.pointee.buffer }
        _modify { yield &state.pointee.buffer }
    }
    var path: [any CodingKey] {
        _read { yield state.pointee.path }
        _modify { yield &state.pointee.path }
    }
    var frames: [(lengthAt: Int, depth: Int)] {
        _read { yield state.pointee.frames }
        _modify { yield &state.pointee.frames }
    }
    var openDepth: Int {
        get { state.pointee.openDepth }
        set { state.pointee.openDepth = newValue }
    }
    var deferredError: (any Error)? {
        get { state.pointee.deferredError }
        set { state.pointee.deferredError = newValue }
    }

    /// Moves the output out of the context.
    func takeBuffer() -> [UInt8] {
        var out: [UInt8] = []
        swap(&out, &state.pointee.buffer)
        return out
    }

    @inline(__always) func closeFrames(deeperThan depth: Int) {
        if openDepth > depth { closeFramesSlow(depth) }
    }

    private func closeFramesSlow(_ depth: Int) {
        while let frame = frames.last, frame.depth > depth {
            frames.removeLast()
            buffer.patchLength(placeholderAt: frame.lengthAt)
        }
        openDepth = frames.last?.depth ?? 0
    }

    /// Starts the nested message for `field` at `depth` unless it is already the open one
    /// (a value may ask its encoder for a keyed container more than once).
    func openMessage(field: UInt32, depth: Int) {
        if openDepth == depth { return }
        closeFrames(deeperThan: depth - 1)
        buffer.appendTag(field, .lengthDelimited)
        frames.append((buffer.count, depth))
        buffer.append(0)
        openDepth = depth
    }

    func truncatePath(to count: Int) {
        if path.count > count { path.removeLast(path.count - count) }
    }

    /// Writes `value` as field `field` of the message at `depth`: scalars, collections, `Date`
    /// and `UUID` directly, anything else through a field-mode `Encoder` (usually a message).
    func encodeValue<T: Encodable>(
        _ value: T, field: UInt32, presence: Bool, depth: Int, key: (any CodingKey)?, pathCount: Int
    ) throws {
        truncatePath(to: pathCount)
        if let key { path.append(key) }
        defer { truncatePath(to: pathCount) }
        if let special = value as? any ProtoFieldEncodable {
            try special.encodeField(self, field: field, presence: presence, depth: depth)
            return
        }
        try value.encode(to: ProtoEncoderImpl(
            context: self, field: field, presence: presence, depth: depth, pathCount: path.count))
        closeFrames(deeperThan: depth)
    }

    func invalidKey(_ key: some CodingKey, _ keyType: Any.Type, value: Any) -> EncodingError {
        EncodingError.invalidValue(value, EncodingError.Context(
            codingPath: path + [key],
            debugDescription: "\(String(reflecting: keyType)) key '\(key.stringValue)' has no protobuf field number: "
                + "its intValue must be in 1...\(maxFieldNumber) (declare `enum CodingKeys: Int, CodingKey`)"))
    }

    func unsupported(_ what: String, value: Any = ()) -> EncodingError {
        EncodingError.invalidValue(value, EncodingError.Context(codingPath: path, debugDescription: what))
    }
}
