enum GatehouseRPCPlaceholder {}
