"""Run inside the reports sandbox instead of the runner (``SLUICE_SANDBOX_MODULE``): reports what a tenant's
code there could see and do, over the runner's channel, for ``test_sandbox.py``."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from controlplane.reports.sandbox.protocol import Channel


def _try(action) -> str:  # type: ignore[no-untyped-def]
    try:
        result = action()
    except Exception as e:  # the refusal is the answer
        return f"refused: {type(e).__name__}"
    return f"allowed: {str(result)[:200]}"


def main() -> int:
    channel = Channel(socket.socket(fileno=int(os.environ["SLUICE_RUNNER_FD"])))
    hello = channel.receive()  # what to try, from the test
    scratch = Path(os.environ["SLUICE_RUNNER_SCRATCH"])
    report = {
        "env": sorted(os.environ),
        "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
        "cap_eff": next(line.split()[1] for line in Path("/proc/self/status").read_text().splitlines()
                        if line.startswith("CapEff")),
        "no_new_privs": next(line.split()[1] for line in Path("/proc/self/status").read_text().splitlines()
                             if line.startswith("NoNewPrivs")),
        "read": {path: _try(lambda p=path: Path(p).read_text()) for path in hello["read"]},
        "list": {path: _try(lambda p=path: os.listdir(p)) for path in hello["list"]},
        "write": {path: _try(lambda p=path: Path(p).write_text("x")) for path in hello["write"]},
        "scratch_write": _try(lambda: (scratch / "probe").write_text("ok")),
        "unmount": _try(lambda: _umount(hello["list"][0])),
    }
    channel.send(report)
    return 0


def _umount(path: str) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.umount2(path.encode(), 2) != 0:  # MNT_DETACH
        raise OSError(ctypes.get_errno(), "umount2")


if __name__ == "__main__":
    sys.exit(main())
