#!/bin/sh
# Runs as the sandbox's first process, inside new mount and PID namespaces (unshare), still privileged there.
# $1: the runner's scratch directory (stays writable); $2...: paths to cover with an empty tmpfs (var/, ...).
# Then: every other mount read-only, capabilities and new privileges dropped, and the runner exec'd.
set -eu
scratch=$1
shift
mount --bind "$scratch" "$scratch"
awk '{print $5}' /proc/self/mountinfo | while read -r point; do
    case "$point" in
        "$scratch"|/proc|/proc/*|/sys|/sys/*|/dev|/dev/*) ;;
        *) mount -o remount,bind,ro "$point" 2>/dev/null || true ;;
    esac
done
for hidden in "$@"; do
    if [ -e "$hidden" ]; then
        if [ -d "$hidden" ]; then
            mount -t tmpfs -o mode=0,size=4k,ro sluice-hidden "$hidden"
        else
            mount --bind /dev/null "$hidden"
        fi
    fi
done
# The root mount must have become read-only, or the sandbox is not one: refuse to start.
if touch /.sluice-sandbox-check 2>/dev/null; then
    rm -f /.sluice-sandbox-check
    echo "sandbox: the filesystem could not be made read-only" >&2
    exit 78
fi
exec setpriv --no-new-privs --inh-caps=-all --ambient-caps=-all --bounding-set=-all ${SLUICE_SANDBOX_SETPRIV:-} \
    -- "$SLUICE_SANDBOX_PYTHON" -m "${SLUICE_SANDBOX_MODULE:-controlplane.reports.sandbox.runner}"
