import CZeroMQ

/// The ZeroMQ socket patterns this binding exposes.
public enum SocketType: Sendable, CaseIterable {
    case pair, pub, sub, dealer, router, push, pull

    var rawValue: Int32 {
        switch self {
        case .pair: ZMQ_PAIR
        case .pub: ZMQ_PUB
        case .sub: ZMQ_SUB
        case .dealer: ZMQ_DEALER
        case .router: ZMQ_ROUTER
        case .push: ZMQ_PUSH
        case .pull: ZMQ_PULL
        }
    }
}
