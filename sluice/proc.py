"""Process helpers shared by the supervisor and the embedded servers."""

from __future__ import annotations

import ctypes
import signal

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """``preexec_fn``: the child gets ``sig`` when its parent dies (Linux; elsewhere a no-op).

    This is what keeps a SIGKILLed supervisor from leaving orphans behind.
    """
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, sig)
    except OSError:
        pass
