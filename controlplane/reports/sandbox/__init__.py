"""The sandboxed report runner: tenants' Spark SQL runs in a process that holds nothing worth stealing.

``launcher.Sandbox`` (in the reports worker) starts ``runner`` (the process that owns the JVM) through
``bootstrap.sh`` inside new mount and PID namespaces: the filesystem read-only, ``var/`` covered by an empty
tmpfs, no capabilities, no new privileges, an environment without the service's secrets. They talk over one
socket (``protocol``). The runner is started once and reused by every run (its JVM stays warm); each run gets
its own Spark session, job group, time limit and result limit.
"""
