"""Ports for servers a test starts later (brokers placed by agents, `sluice up`'s broker)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def free_port_range(count: int) -> tuple[int, int]:
    """``count`` consecutive ports, free now and below the kernel's ephemeral range.

    Brokers bind them later; a port from the ephemeral range could meanwhile become some client's outgoing
    port (every other test picks its ports there), so the pools stay out of it. The start depends on the pid
    so two xdist workers start apart.
    """
    import socket

    low = 32768
    with contextlib.suppress(OSError, ValueError, IndexError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    slots = max(1, (low - 20000) // count)
    first_slot = os.getpid() % slots
    for i in range(slots):
        first = 20000 + ((first_slot + i * 7) % slots) * count
        socks = []
        try:
            for port in range(first, first + count):
                sock = socket.socket()
                socks.append(sock)
                sock.bind(("127.0.0.1", port))
            return first, first + count - 1
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise RuntimeError("no free port range below the ephemeral range")
