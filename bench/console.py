"""Web console in the browser: the topics page with 5,000 topics, and the live tail at 1,000 records/s.

    python bench/console.py            # 5,000 topics, 60 s of tail: ~6-8 minutes on 2 cores
    python bench/console.py --quick    # 500 topics, 15 s of tail: ~2 minutes (a smoke run)

Starts ``sluice up`` in a temp SLUICE_VAR_DIR (bench/rest.py's Stack: embedded Postgres and Redis, web, worker,
beat, agent, the demo cluster's broker), serving the built console (``make console`` first), and drives Debian's
Chromium through Playwright (tests/console/browser.py), signed in as the demo tenant's owner.

* Topics: ``--topics`` one-partition topics created by a Kafka AdminClient and adopted by the control plane's
  reconciler (as a client-made topic is), then the topics page loaded ``--loads`` times: time from navigation
  start to the first page of rows in the DOM (``performance.now()`` polled each animation frame). Baseline, same
  run: the same first page's API request alone, fetched from that page (the ratio is what the page adds).
  Then a search typed into the box: keystroke to the filtered rows. The list's figures (size, records, under-
  replicated partitions, rate): API pages not shown before (one batched admin round to the cluster each) against
  the same pages fetched again at once (figures from the cache).
* Live tail: a one-partition topic fed at 1,000 records/s (100 B, a paced confluent-kafka producer) for
  ``--seconds``, the topic page's Live tail open. Every 2.5 s a click on a view switch (re-rendering the shown
  rows); its latency is from the click event's timestamp to the frame after the handler ran. Baseline, same
  run: the same clicks with no traffic. The JS heap (CDP Runtime.getHeapUsage after a forced GC) is sampled at
  each click: bounded means the last sample is near the first. Records delivered to the page are counted.
* JavaScript for the first page: frontend/dist/bundle-size.json (written by the build).

Prints figures only; nothing here is a pass/fail threshold.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import Procs, ratio
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from playwright.sync_api import Page, sync_playwright
from rest import ROOT, Stack, paced_producer

from tests.console.browser import DIST, check_prerequisites, launch, sign_in

RATE = 1000.0


def wait(condition: Any, what: str, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.5)
    return value


def lift_partition_limit(stack: Stack, partitions: int) -> None:
    """No plan lets one broker hold 5,000 topics (basic: 100 partitions), yet the goal is the page at 5,000: the
    bench writes ``max_partitions`` into the demo cluster's ``spec`` row (bypassing the plan's ceiling, which only the
    API enforces) and reconciles, then waits until the broker accepts that many."""
    code = ("from controlplane.clusters.models import Cluster; "
            "from controlplane.clusters.tasks import enqueue_reconcile; "
            f"c = Cluster.objects.get(pk={stack.cluster_pk!r}); c.spec = {{**c.spec, 'max_partitions': {partitions}}}; "
            f"c.save(update_fields=['spec']); enqueue_reconcile(c.pk)")
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env["SLUICE_VAR_DIR"] = str(stack.tmp / "var")
    done = subprocess.run([sys.executable, "-m", "sluice", "manage", "shell", "-c", code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise SystemExit(f"lifting the partition limit failed: {done.stderr[-2000:]}")
    admin = AdminClient(stack.kafka)

    def accepted() -> bool:
        future = admin.create_topics([NewTopic("bench-limit-probe", partitions - 10, 1)], validate_only=True,
                                     request_timeout=30)["bench-limit-probe"]
        try:
            future.result()
            return True
        except KafkaException:
            return False

    wait(accepted, f"the demo cluster's partition limit at {partitions}", 120)


def make_topics(stack: Stack, count: int) -> float:
    """``count`` topics through the Kafka protocol, then until the control plane lists them all (seconds)."""
    admin = AdminClient(stack.kafka)
    start = time.monotonic()
    names = [f"bench-{i:05d}" for i in range(count)]
    for at in range(0, count, 50):
        batch = names[at:at + 50]
        for attempt in range(6):  # a broker busy creating the previous batch can time a request out: ask again
            futures = admin.create_topics([NewTopic(n, 1, 1) for n in batch], operation_timeout=120,
                                          request_timeout=180)
            failed = []
            for name, future in futures.items():
                try:
                    future.result()
                except KafkaException as exc:
                    if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                        failed.append(name)
            if not failed:
                break
            if attempt == 5:
                raise SystemExit(f"creating topics failed: {failed[:5]}")
            batch = failed

    def listed() -> bool:
        path = f"/api/v1/tenants/{stack.tenant}/clusters/{stack.cluster_pk}/topics?limit=1"
        status, body = stack.api("GET", path)
        return status == 200 and body["count"] >= count

    wait(listed, f"{count} topics in the control plane", 900)
    return time.monotonic() - start


def topics_page(page: Page, stack: Stack, loads: int, last: str) -> dict[str, Any]:
    url = f"/t/{stack.tenant}/clusters/{stack.cluster_pk}/topics"
    api = f"/api/v1/tenants/{stack.tenant}/clusters/{stack.cluster_pk}/topics/?limit=50&offset=0&ordering=name"
    visible, fetched = [], []
    for _ in range(loads):
        page.goto(url, wait_until="commit")
        shown = page.wait_for_function(
            "() => document.querySelectorAll('table tbody tr a').length >= 50 && performance.now()", polling="raf",
            timeout=60_000).json_value()
        visible.append(float(shown))
        fetched.append(float(page.evaluate(
            "async (u) => { const t = performance.now(); await (await fetch(u)).json();"
            " return performance.now() - t; }", api)))
    # The list's figures (size, records, replication, rate) cost one batched round to the cluster per page, then
    # come from a 10 s cache: pages no load above showed (cold), each fetched again at once (cached).
    cold, cached = [], []
    timed = ("async (u) => { const t = performance.now(); await (await fetch(u)).json();"
             " return performance.now() - t; }")
    for n in range(1, loads + 1):
        other = api.replace("offset=0", f"offset={50 * n}")
        cold.append(float(page.evaluate(timed, other)))
        cached.append(float(page.evaluate(timed, other)))
    count = page.get_by_test_id("topic-count").inner_text()
    box = page.get_by_label("Search topics")
    box.click()
    page.evaluate("() => { window.__typed = performance.now(); }")
    box.press_sequentially(last, delay=0)
    search_ms = float(page.wait_for_function(
        "(last) => { const rows = document.querySelectorAll('table tbody tr a');"
        " return rows.length === 1 && rows[0].textContent.endsWith(last) && performance.now() - window.__typed; }",
        arg=last, polling="raf", timeout=60_000).json_value())
    return {"visible": visible, "api": fetched, "search_ms": search_ms, "count": count, "cold": cold,
            "cached": cached}


CLICK_PROBE = """() => {
  window.__clicks = [];
  document.addEventListener('click', (event) => {
    const started = event.timeStamp;
    requestAnimationFrame(() => setTimeout(() => window.__clicks.push(performance.now() - started), 0));
  }, true);
}"""


def tail_clicks(page: Page, seconds: float, cdp: Any) -> tuple[list[float], list[int]]:
    """A view-switch click every 2.5 s for ``seconds``: click latencies (ms) and JS heap samples (bytes)."""
    page.evaluate("() => { window.__clicks = []; }")
    heap: list[int] = []
    views = ["Text", "Pretty JSON"]
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        page.get_by_role("region", name="Live tail").get_by_label(views[n % 2], exact=True).click()
        n += 1
        cdp.send("HeapProfiler.collectGarbage")
        heap.append(int(cdp.send("Runtime.getHeapUsage")["usedSize"]))
        time.sleep(2.5)
    page.wait_for_function("(n) => window.__clicks.length >= n", arg=n, timeout=30_000)
    return [float(x) for x in page.evaluate("() => window.__clicks")], heap


def tail_run(page: Page, stack: Stack, seconds: float) -> dict[str, Any]:
    topic = "bench-tail"
    admin = AdminClient(stack.kafka)  # kept: its futures die with it
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    path = f"/api/v1/tenants/{stack.tenant}/clusters/{stack.cluster_pk}/topics/{topic}"
    wait(lambda: stack.api("GET", path)[0] == 200, "the tail topic in the control plane", 300)
    page.goto(f"/t/{stack.tenant}/clusters/{stack.cluster_pk}/topics/{topic}?tab=tail")
    page.get_by_test_id("tail-state").filter(has_text="live").wait_for(timeout=60_000)
    page.evaluate(CLICK_PROBE)
    cdp = page.context.new_cdp_session(page)
    idle_clicks, idle_heap = tail_clicks(page, min(15.0, seconds), cdp)
    stop = threading.Event()
    sent: list[int] = []
    feeder = threading.Thread(
        target=lambda: sent.append(paced_producer(stack.kafka, topic, 100, RATE, seconds, stop)))
    started = time.monotonic()
    feeder.start()
    try:
        time.sleep(2)
        busy_clicks, busy_heap = tail_clicks(page, seconds - 4, cdp)
    finally:
        feeder.join()
    elapsed = time.monotonic() - started
    page.wait_for_timeout(1000)
    received = int(page.get_by_test_id("tail-received").inner_text().split()[0])
    shown = page.get_by_role("region", name="Live tail").get_by_test_id("record").count()
    return {"idle_clicks": idle_clicks, "idle_heap": idle_heap, "busy_clicks": busy_clicks, "busy_heap": busy_heap,
            "sent": sent[0] if sent else 0, "received": received, "elapsed": elapsed, "shown": shown}


def ms(values: list[float]) -> str:
    if not values:
        return "n/a"
    ordered = sorted(values)
    return (f"p50 {statistics.median(ordered):.0f} ms, max {ordered[-1]:.0f} ms "
            f"(n={len(ordered)})")


def mib(n: float) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def report_topics(result: dict[str, Any]) -> None:
    visible, api = result["visible"], result["api"]
    print(f"topics page ({result['count']}): first page of 50 rows visible {ms(visible)} after navigation")
    times = ratio(statistics.median(visible), statistics.median(api))
    print(f"  its API request alone {ms(api)}; page/API x{times:.1f}")
    print(f"  search: keystrokes to the one matching row {result['search_ms']:.0f} ms (with the 250 ms debounce)")
    cold, cached = result["cold"], result["cached"]
    times = ratio(statistics.median(cold), statistics.median(cached))
    print(f"  API page of 50 with its figures from the cluster (one batched round) {ms(cold)}; the same page "
          f"again (cached figures) {ms(cached)}; cold/cached x{times:.1f}")


def report_tail(tail: dict[str, Any]) -> None:
    rate = tail["received"] / tail["elapsed"]
    print(f"live tail at {RATE:.0f} rec/s for {tail['elapsed']:.0f} s: {tail['sent']} sent, "
          f"{tail['received']} delivered to the page ({rate:.0f} rec/s), {tail['shown']} rows shown")
    idle, busy = tail["idle_clicks"], tail["busy_clicks"]
    print(f"  click to next frame: idle {ms(idle)}; under load {ms(busy)}; "
          f"p50 ratio x{ratio(statistics.median(busy), statistics.median(idle)):.2f}")
    heap = tail["busy_heap"]
    print(f"  JS heap after GC: idle {mib(tail['idle_heap'][-1])}; under load first {mib(heap[0])}, "
          f"max {mib(max(heap))}, last {mib(heap[-1])} (last/first x{ratio(heap[-1], heap[0]):.2f})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--topics", type=int)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--loads", type=int, default=5)
    args = parser.parse_args()
    topics = args.topics or (500 if args.quick else 5000)
    seconds = args.seconds or (15.0 if args.quick else 60.0)
    check_prerequisites()
    size = json.loads((DIST / "bundle-size.json").read_text())
    lazy = ", ".join(f"{c['file']} {c['gzip'] / 1024:.1f} KB" for c in size["lazy"])
    print(f"first-page JavaScript: {size['firstPage'] / 1024:.1f} KB gzipped "
          f"(budget {size['budget'] / 1024:.0f} KB); lazy: {lazy}")
    procs = Procs()
    tmp = Path(tempfile.mkdtemp(prefix="sluice-bench-console-"))
    stack = Stack(procs, tmp)
    try:
        stack.start_sluice()
        creds = json.loads((tmp / "var" / "demo-credentials.json").read_text())
        lift_partition_limit(stack, topics + 200)
        adopted = make_topics(stack, topics)
        print(f"{topics} topics created by a Kafka client and listed by the control plane in {adopted:.0f} s")
        with sync_playwright() as playwright:
            browser = launch(playwright)
            context = browser.new_context(base_url=f"http://127.0.0.1:{stack.port}",
                                          viewport={"width": 1400, "height": 900})
            page = context.new_page()
            sign_in(page, f"http://127.0.0.1:{stack.port}", creds["username"], creds["password"])
            report_topics(topics_page(page, stack, args.loads, f"{topics - 1:05d}"))
            report_tail(tail_run(page, stack, seconds))
            browser.close()
    finally:
        procs.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
