import CZeroMQ

/// Socket options this binding sets. Durations are in milliseconds, as libzmq takes them.
public enum SocketOption {
    /// How long unsent messages are kept after `close()` (ms; 0 drops them, -1 waits forever).
    case linger(Int)
    /// Maximum queued outgoing messages per peer.
    case sendHighWaterMark(Int)
    /// Maximum queued incoming messages per peer.
    case receiveHighWaterMark(Int)
    /// First reconnect delay after a lost connection (ms).
    case reconnectInterval(Int)
    /// Upper bound of the exponential reconnect back-off (ms; 0 = no back-off).
    case reconnectIntervalMax(Int)
    /// Largest inbound message accepted; a peer sending more is disconnected (-1 = no limit).
    case maxMessageSize(Int64)
    /// Queue messages only to completed connections (sends fail with EAGAIN while no peer is up).
    case immediate(Bool)
    /// ROUTER: fail with EHOSTUNREACH instead of dropping a message to an unknown peer.
    case routerMandatory(Bool)
    /// SUB: receive messages whose first frame starts with this prefix.
    case subscribe([UInt8])
    /// SUB: stop receiving a prefix.
    case unsubscribe([UInt8])
    /// The identity a DEALER presents to a ROUTER.
    case routingID([UInt8])
    /// Act as a CURVE server (needs `curveSecretKey`).
    case curveServer(Bool)
    /// This socket's CURVE public key (32 bytes).
    case curvePublicKey([UInt8])
    /// This socket's CURVE secret key (32 bytes).
    case curveSecretKey([UInt8])
    /// The server's CURVE public key, for a client (32 bytes).
    case curveServerKey([UInt8])
    /// ZAP domain for authentication requests.
    case zapDomain(String)
    /// Maximum time for a connection handshake (ms).
    case handshakeInterval(Int)
    /// Send ZMTP heartbeats this often (ms; 0 = off).
    case heartbeatInterval(Int)
    /// Drop a connection whose heartbeats go unanswered this long (ms).
    case heartbeatTimeout(Int)
    /// Blocking receive timeout (ms; -1 = forever).
    case receiveTimeout(Int)
    /// Blocking send timeout (ms; -1 = forever).
    case sendTimeout(Int)
    /// Accept IPv6 as well as IPv4 on tcp endpoints.
    case ipv6(Bool)
}

extension Socket {
    /// Sets one option.
    public func set(_ option: SocketOption) throws {
        switch option {
        case .linger(let v): try setInt32(ZMQ_LINGER, v, "LINGER")
        case .sendHighWaterMark(let v): try setInt32(ZMQ_SNDHWM, v, "SNDHWM")
        case .receiveHighWaterMark(let v): try setInt32(ZMQ_RCVHWM, v, "RCVHWM")
        case .reconnectInterval(let v): try setInt32(ZMQ_RECONNECT_IVL, v, "RECONNECT_IVL")
        case .reconnectIntervalMax(let v): try setInt32(ZMQ_RECONNECT_IVL_MAX, v, "RECONNECT_IVL_MAX")
        case .maxMessageSize(var v):
            try check(zmq_setsockopt(handle, ZMQ_MAXMSGSIZE, &v, MemoryLayout<Int64>.size), "setsockopt(MAXMSGSIZE)")
        case .immediate(let v): try setInt32(ZMQ_IMMEDIATE, v ? 1 : 0, "IMMEDIATE")
        case .routerMandatory(let v): try setInt32(ZMQ_ROUTER_MANDATORY, v ? 1 : 0, "ROUTER_MANDATORY")
        case .subscribe(let v): try setBytes(ZMQ_SUBSCRIBE, v, "SUBSCRIBE")
        case .unsubscribe(let v): try setBytes(ZMQ_UNSUBSCRIBE, v, "UNSUBSCRIBE")
        case .routingID(let v): try setBytes(ZMQ_ROUTING_ID, v, "ROUTING_ID")
        case .curveServer(let v): try setInt32(ZMQ_CURVE_SERVER, v ? 1 : 0, "CURVE_SERVER")
        case .curvePublicKey(let v): try setKey(ZMQ_CURVE_PUBLICKEY, v, "CURVE_PUBLICKEY")
        case .curveSecretKey(let v): try setKey(ZMQ_CURVE_SECRETKEY, v, "CURVE_SECRETKEY")
        case .curveServerKey(let v): try setKey(ZMQ_CURVE_SERVERKEY, v, "CURVE_SERVERKEY")
        case .zapDomain(let v): try setBytes(ZMQ_ZAP_DOMAIN, Array(v.utf8), "ZAP_DOMAIN")
        case .handshakeInterval(let v): try setInt32(ZMQ_HANDSHAKE_IVL, v, "HANDSHAKE_IVL")
        case .heartbeatInterval(let v): try setInt32(ZMQ_HEARTBEAT_IVL, v, "HEARTBEAT_IVL")
        case .heartbeatTimeout(let v): try setInt32(ZMQ_HEARTBEAT_TIMEOUT, v, "HEARTBEAT_TIMEOUT")
        case .receiveTimeout(let v): try setInt32(ZMQ_RCVTIMEO, v, "RCVTIMEO")
        case .sendTimeout(let v): try setInt32(ZMQ_SNDTIMEO, v, "SNDTIMEO")
        case .ipv6(let v): try setInt32(ZMQ_IPV6, v ? 1 : 0, "IPV6")
        }
    }

    /// Sets several options in order.
    public func set(_ options: [SocketOption]) throws {
        for option in options { try set(option) }
    }

    /// Reads an integer option (for options this binding does not name).
    public func int32Option(_ name: Int32) throws -> Int32 {
        var value: Int32 = 0
        var size = MemoryLayout<Int32>.size
        try check(zmq_getsockopt(handle, name, &value, &size), "getsockopt(\(name))")
        return value
    }

    private func setInt32(_ name: Int32, _ value: Int, _ label: String) throws {
        guard let v = Int32(exactly: value) else {
            throw ZMQError(code: EINVAL, operation: "setsockopt(\(label)): \(value) out of range")
        }
        var value32 = v
        try check(zmq_setsockopt(handle, name, &value32, MemoryLayout<Int32>.size), "setsockopt(\(label))")
    }

    private func setBytes(_ name: Int32, _ value: [UInt8], _ label: String) throws {
        try value.withUnsafeBytes { buffer in
            try check(zmq_setsockopt(handle, name, buffer.baseAddress, buffer.count), "setsockopt(\(label))")
        }
    }

    private func setKey(_ name: Int32, _ key: [UInt8], _ label: String) throws {
        guard key.count == 32 else {
            throw ZMQError(code: EINVAL, operation: "setsockopt(\(label)): a CURVE key has 32 bytes, not \(key.count)")
        }
        try setBytes(name, key, label)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
