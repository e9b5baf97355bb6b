"""The sandboxed runner's process: one SparkSession (its JVM started once), many runs, one socket.

Started by ``launcher.Sandbox`` through ``bootstrap.sh``: read-only filesystem, ``var/`` covered, own PID
namespace, no capabilities, and an environment without the service's secrets. It never imports Django's
settings (there are none to import). What it can reach of a cluster is what the run's connection options
give: a token for the report owner's principal on that one cluster, so the cluster's ACLs decide.

Threads: the main thread reads the worker's messages; each run has a thread (Spark calls block) with a timer
for its time limit and a progress thread; a monitor thread exits the process when the JVM dies, so the
worker sees the end of the channel and starts a new runner.

Every run's query passes two checks before Spark analyses it: the built-in kinds' SQL is generated from checked
parameters, and a SQL report's text is parsed by Spark's own parser and checked with ``sqlpolicy`` (the API
checked sqlglot's parse of it already). ``spark.sql.runSQLOnFiles`` is off.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from controlplane.reports import engine, kinds
from controlplane.reports.sandbox.protocol import Channel, ChannelClosed
from controlplane.reports.sandbox.sparkplan import policy_tree
from controlplane.reports.sqlpolicy import PolicyError, check

log = logging.getLogger("sluice.reports.runner")
PROGRESS_SECONDS = 0.25
JVM_EXITED = 70  # the runner's exit status when its JVM died under it
JVM_EXIT_WAIT = 2.0


class _Run:
    """One run on its thread. ``cancel`` may be called from the main thread."""

    def __init__(self, runner: Runner, message: dict[str, Any]) -> None:
        self.runner = runner
        self.id = str(message["run"])
        self.message = message
        self.group = f"sluice-report-run-{self.id}"
        self.reason = ""  # why the job group was cancelled: "cancel" or "timeout"
        self.done = threading.Event()

    def cancel(self, reason: str) -> None:
        if not self.reason:
            self.reason = reason
        self.runner.spark.sparkContext.cancelJobGroup(self.group)

    def execute(self) -> None:
        started = time.monotonic()
        limit = float(self.message["limits"]["run_seconds"])
        timer = threading.Timer(limit, self.cancel, args=("timeout",))
        timer.daemon = True
        progress = threading.Thread(target=self._progress, name=f"progress-{self.id}", daemon=True)
        scanned = None
        try:
            session = self.runner.spark.newSession()
            session.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
            session.sparkContext.setJobGroup(self.group, f"report run {self.id}", interruptOnCancel=True)
            timer.start()
            progress.start()
            definition = self.message["definition"]
            if definition["kind"] == "sql":
                views = [kinds.view_name(t) for t in definition["params"]["topics"]]
                check(policy_tree(session, definition["params"]["sql"]), views)
            time_range = kinds.TimeRange(*self.message["time_range"])
            df, scanned = engine.prepare(session, definition, self.message["connection"], time_range,
                                         commits=self.message.get("commits"), typed=self.message.get("typed"))
            limits = self.message["limits"]
            columns = engine.write_result(df, Path(self.message["out"]), max_rows=int(limits["rows"]),
                                          max_bytes=int(limits["bytes"]))
            self.runner.send({"run": self.id, "event": "done", "columns": columns, "scanned": scanned})
        except BaseException as e:  # every failure is the run's answer
            if self.runner.jvm_died(e):  # not this run's failure: the worker hears of the death, not an error
                os._exit(JVM_EXITED)
            if self.reason == "timeout":
                error = f"The run took longer than {limit:g} s (this tenant's limit) and was stopped."
            elif self.reason == "cancel":
                error = "Cancelled."
            elif isinstance(e, PolicyError):
                error = f"Refused: {e}"
            else:
                error = engine.readable_error(e)
            self.runner.send({"run": self.id, "event": "failed", "error": error, "reason": self.reason or "error",
                              "scanned": scanned, "seconds": time.monotonic() - started})
        finally:
            timer.cancel()
            self.done.set()
            self.runner.finished(self.id)

    def _progress(self) -> None:
        last: dict[str, int] = {}
        tracker = self.runner.spark.sparkContext.statusTracker()
        while not self.done.wait(PROGRESS_SECONDS):
            try:
                jobs = tracker.getJobIdsForGroup(self.group)
                if self.reason and jobs:
                    # Spark cancels only the group's active jobs: one started after the cancel (the timer fired
                    # while the run was still planning) is cancelled here, within PROGRESS_SECONDS of starting.
                    self.runner.spark.sparkContext.cancelJobGroup(self.group)
                tasks = done = active = 0
                for job_id in jobs:
                    job = tracker.getJobInfo(job_id)
                    for stage_id in job.stageIds if job is not None else ():
                        stage = tracker.getStageInfo(stage_id)
                        if stage is not None:
                            tasks += stage.numTasks
                            done += stage.numCompletedTasks
                            active += stage.numActiveTasks
                progress = {"jobs": len(jobs), "tasks": tasks, "tasks_done": done, "tasks_active": active}
                if progress != last:
                    self.runner.send({"run": self.id, "event": "progress", "progress": progress})
                    last = progress
            except Exception:  # the JVM going away: the monitor ends the process
                return


class Runner:
    """The process's state: the channel, the session, the runs in flight. Owned by the main thread."""

    def __init__(self, channel: Channel, scratch: Path) -> None:
        from dataplane.client.spark.session import spark_session

        self.channel = channel
        self._lock = threading.Lock()
        self.runs: dict[str, _Run] = {}
        self.stopping = False
        java_tmp = scratch / "java-tmp"
        java_tmp.mkdir(exist_ok=True)
        self.spark = spark_session(app_name="sluice-reports", conf={
            "spark.sql.runSQLOnFiles": "false",
            "spark.local.dir": str(scratch / "spark-local"),
            "spark.driver.extraJavaOptions": f"-XX:+UseSerialGC -XX:-UsePerfData -Djava.io.tmpdir={java_tmp}",
        })
        self.spark.sql("SELECT 1").collect()  # load and JIT the planner now, not in the first run

    def send(self, message: dict[str, Any]) -> None:
        try:
            self.channel.send(message)
        except ChannelClosed:
            os._exit(0)  # the worker is gone: so is the reason to live

    def finished(self, run_id: str) -> None:
        with self._lock:
            self.runs.pop(run_id, None)

    def start_run(self, message: dict[str, Any]) -> None:
        run = _Run(self, message)
        with self._lock:
            self.runs[run.id] = run
        threading.Thread(target=run.execute, name=f"run-{run.id}", daemon=True).start()

    def cancel(self, run_id: str) -> None:
        with self._lock:
            run = self.runs.get(run_id)
        if run is not None:
            run.cancel("cancel")

    def jvm_died(self, error: BaseException) -> bool:
        """Whether ``error`` is the JVM's death (a lost gateway connection, and the JVM gone soon after)."""
        from py4j.protocol import Py4JNetworkError
        from pyspark import SparkContext

        if self.stopping or not isinstance(error, OSError | Py4JNetworkError):
            return False
        proc = getattr(SparkContext._gateway, "proc", None)
        if proc is None:
            return False
        try:
            proc.wait(JVM_EXIT_WAIT)
        except Exception:  # still running: the error was something else
            return False
        return True

    def monitor_jvm(self) -> None:
        from pyspark import SparkContext

        proc = getattr(SparkContext._gateway, "proc", None)
        if proc is None:
            return
        code = proc.wait()
        if self.stopping:
            return
        log.error("the runner's JVM exited (%s): the runner exits", code)
        os._exit(JVM_EXITED)


def main() -> int:
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "INFO"), stream=sys.stderr,
                        format="%(asctime)s runner %(levelname)s %(message)s")
    channel = Channel(socket.socket(fileno=int(os.environ["SLUICE_RUNNER_FD"])))
    runner = Runner(channel, Path(os.environ["SLUICE_RUNNER_SCRATCH"]))
    threading.Thread(target=runner.monitor_jvm, name="jvm-monitor", daemon=True).start()
    channel.send({"event": "ready", "pid": os.getpid()})
    while True:
        try:
            message = channel.receive()
        except ChannelClosed:
            break
        op = message.get("op")
        if op == "run":
            runner.start_run(message)
        elif op == "cancel":
            runner.cancel(str(message.get("run")))
        elif op == "stop":
            break
    from dataplane.client.spark.session import stop_spark

    runner.stopping = True
    stop_spark()
    return 0


if __name__ == "__main__":
    sys.exit(main())
