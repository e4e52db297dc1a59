# The containers' upstream DNS in the deployment test (scripts/deploy-e2e): listens on docker0's
# address and never answers, writing each query's name to standard output. Docker's embedded DNS
# answers the names of running containers itself and asks this server only for other names, the
# name of a stopped container among them: such a lookup then takes the resolver's whole timeout,
# the slow answer that used to freeze every ZeroMQ socket of a process (issue 35), and no query
# from a container leaves the machine.
import socket
import sys

s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 53))
print("listening", flush=True)
while True:
    data, _ = s.recvfrom(4096)
    labels, i = [], 12
    while i < len(data) and data[i] != 0:
        labels.append(data[i + 1:i + 1 + data[i]].decode(errors="replace"))
        i += 1 + data[i]
    print(".".join(labels), flush=True)
