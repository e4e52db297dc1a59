# The containers' upstream DNS in the deployment test (scripts/deploy-e2e), on docker0's address.
# Docker's embedded DNS answers the names of running containers itself and asks this server for
# every other name. The names of the compose services (a stopped container's name among them) are
# never answered: such a lookup takes the resolver's whole timeout, the slow answer that used to
# freeze every ZeroMQ socket of a process (issue 35). Any other name (apt's mirror, for the image
# builds) is asked of the host's own resolver, from the host, so no query leaves the machine with a
# container's address. Each query's name is written to standard output.
import socket
import sys
import threading

listen, upstream = sys.argv[1], sys.argv[2]
SERVICES = {"identity", "token", "gateway", "postgres"}

s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((listen, 53))
print("listening", flush=True)


def relay(data, peer):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.settimeout(3)
    try:
        u.sendto(data, (upstream, 53))
        answer, _ = u.recvfrom(4096)
        s.sendto(answer, peer)
    except OSError:
        pass
    finally:
        u.close()


while True:
    data, peer = s.recvfrom(4096)
    labels, i = [], 12
    while i < len(data) and data[i] != 0:
        labels.append(data[i + 1:i + 1 + data[i]].decode(errors="replace"))
        i += 1 + data[i]
    name = ".".join(labels)
    first = labels[0].lower() if labels else ""
    silent = first in SERVICES or first.rstrip("0123456789").rstrip("-") in SERVICES
    print(("silent " if silent else "relayed ") + name, flush=True)
    if not silent and len(data) >= 12:
        threading.Thread(target=relay, args=(data, peer), daemon=True).start()
