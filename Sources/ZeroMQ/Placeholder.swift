enum ZeroMQPlaceholder {}
