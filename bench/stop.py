"""How long `sluice up` takes to stop on Ctrl-C, with and without the report runner's JVM.

Each case starts `sluice up` on a fresh var/ (embedded Postgres and Redis, a demo cluster), waits for its
banner (and, with the runner, for the runner's JVM), sends SIGINT and measures until `up` has exited and every
process it ran is gone (its process tree as seen just before the signal, and the embedded Postgres). The
baseline, measured in the same run, is the time to stop a bare embedded Postgres and Redis: the floor any
`sluice up` stop sits on. ``--sluice-root`` measures another tree (an older checkout) the same way.

    python bench/stop.py [--rounds 2] [--sluice-root /work/main --runner off]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, sluice_env, sluice_python

from sluice.embedded import ensure_services, free_port, free_port_range
from sluice.proc import descendants

BANNER = "Press Ctrl-C to stop."
UP_TIMEOUT = 300.0


def _wait(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: {what} did not happen in {timeout:.0f}s")
        time.sleep(0.1)


def _has_java(pid: int) -> bool:
    for child in descendants(pid):
        try:
            if Path(f"/proc/{child}/comm").read_text().strip() == "java":
                return True
        except OSError:
            continue
    return False


def _alive(pids: set[int]) -> set[int]:
    left = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            left.add(pid)
    return left


def baseline() -> float:
    """Seconds to stop a bare embedded Postgres and Redis (started on a fresh directory)."""
    scratch = Path(tempfile.mkdtemp(prefix="bench-stop-base-"))
    saved = {k: os.environ.pop(k, None) for k in ("DATABASE_URL", "REDIS_URL")}
    try:
        services = ensure_services(scratch)
        started = time.monotonic()
        services.stop()
        return time.monotonic() - started
    finally:
        os.environ.update({k: v for k, v in saved.items() if v is not None})
        shutil.rmtree(scratch, ignore_errors=True)


def stop_time(root: Path, runner: bool) -> tuple[float, int, list[str]]:
    """Seconds from SIGINT to nothing left running, `up`'s exit status, and its lines about stopping."""
    scratch = Path(tempfile.mkdtemp(prefix="bench-stop-"))
    var = scratch / "var"
    low, _ = free_port_range(1)
    env = {k: v for k, v in sluice_env(root).items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(SLUICE_VAR_DIR=str(var), SLUICE_REPORTS_PRESTART="true" if runner else "false")
    out = scratch / "out.txt"
    with out.open("w") as sink:
        proc = subprocess.Popen([sluice_python(root), "-m", "sluice", "up", "--port", str(free_port()), "--quiet",
                                 "--workers", "1", "--broker-ports", f"{low}-{low}"], cwd=root, env=env,
                                stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait(lambda: BANNER in out.read_text(errors="replace") or proc.poll() is not None, UP_TIMEOUT, "the banner")
        if runner:
            _wait(lambda: _has_java(proc.pid), UP_TIMEOUT, "the report runner's JVM")
            log = var / "log" / "reports-worker.log"
            if log.exists():  # a tree that logs there: wait for the runner to be ready, not only its JVM there
                _wait(lambda: "report runner started" in log.read_text(errors="replace"), UP_TIMEOUT,
                      "the report runner's readiness")
        pids = set(descendants(proc.pid)) | {proc.pid}
        postmaster = var / "postgres" / "postmaster.pid"
        if postmaster.exists():
            pids.add(int(postmaster.read_text().split()[0]))
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        code = proc.wait(300)
        _wait(lambda: not _alive(pids), 120, "every process's exit")
        seconds = time.monotonic() - started
        said = out.read_text(errors="replace").split(BANNER)[-1].splitlines()
        return seconds, code, [line for line in said if line.startswith("stopping ") and not line.endswith("… done")]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sluice-root", type=Path, default=ROOT, help="the source tree to measure")
    parser.add_argument("--runner", choices=("both", "off", "on"), default="both",
                        help="measure without the report runner, with it, or both (an older tree may never prestart "
                             "its runner: 'off')")
    args = parser.parse_args()
    base = statistics.median(baseline() for _ in range(args.rounds))
    print(f"baseline: stop a bare embedded Postgres+Redis      {base:6.2f}s", flush=True)
    for runner in {"both": (False, True), "off": (False,), "on": (True,)}[args.runner]:
        times = []
        for _ in range(args.rounds):
            seconds, code, slow = stop_time(args.sluice_root, runner)
            times.append(seconds)
            if code != 0:
                print(f"  (exit status {code})", flush=True)
            for line in slow:  # a child that needed more than SIGTERM
                print(f"  ({line})", flush=True)
        median = statistics.median(times)
        label = "with the report runner (JVM)" if runner else "without the report runner  "
        print(f"sluice up stop, {label}     {median:6.2f}s  ({median / base:.1f}x baseline; "
              f"rounds: {', '.join(f'{t:.2f}' for t in times)})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
