#!/usr/bin/env python3
"""dtrain dashboard in a real browser (headless Chromium).

A finished run (dtrain train --run-dir) and a running one (its metrics file cut
short, the last line half-written, no result yet) are served; Chromium loads the
page, lets its script poll and render, and dumps the DOM: the values the page
shows must be those in the files. A screenshot is kept in the build directory.
Also: the JSON endpoint the page polls follows a file as it grows, and bad
arguments (a missing directory, a port in use) fail with one line, exit 2.

usage: dashboard_test.py DTRAIN SCREENSHOT_PNG
"""
import html.parser
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

DTRAIN, SCREENSHOT = sys.argv[1], sys.argv[2]
MACHINE = os.path.join(os.path.dirname(__file__), "../../../plan/clusters/example-cpu.json")
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def records(path):
    out = []
    with open(path) as f:
        for line in f:
            if line.endswith("\n"):
                out.append(json.loads(line))
    return out


def last(recs, key):
    vals = [r[key] for r in recs if key in r and "step" in r]
    return vals[-1] if vals else None


class Cells(html.parser.HTMLParser):
    """Every <td data-field> of every <tr data-run>: {run: {field: data-value or text}}."""

    def __init__(self):
        super().__init__()
        self.runs, self.run, self.field, self.charts, self.phases = {}, None, None, set(), set()
        self.ranks, self.ranks_of = {}, None  # run -> [(work ms, wait ms)] of its rank rows

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and "data-run" in a:
            self.run = a["data-run"]
            self.runs[self.run] = {}
        if tag == "td" and self.run and "data-field" in a:
            self.field = a["data-field"]
            self.runs[self.run][self.field] = a.get("data-value")
        if tag == "div" and "data-chart" in a:
            self.charts.add(a["data-chart"])
        if tag == "div" and "data-phases" in a:
            self.phases.add(a["data-phases"])
        if tag == "div" and "data-ranks" in a:
            self.ranks_of = a["data-ranks"]
            self.ranks[self.ranks_of] = []
        if tag == "div" and "data-rank" in a and self.ranks_of:
            self.ranks[self.ranks_of].append((float(a["data-work-ms"]), float(a["data-wait-ms"])))

    def handle_data(self, data):
        if self.run and self.field and self.runs[self.run][self.field] is None:
            self.runs[self.run][self.field] = data.strip()
        self.field = None


def chromium(*args):
    # --no-sandbox: Chromium's sandbox refuses to start as root, which the CI
    # container and this test machine run as; the page is our own, served locally.
    cmd = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--virtual-time-budget=10000", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def main():
    if not shutil.which("chromium"):
        print("chromium is not installed (scripts/test.sh installs it): skipped")
        return 77
    tmp = tempfile.mkdtemp(prefix="dtrain-dashboard-")
    runs = os.path.join(tmp, "runs")
    done, live = os.path.join(runs, "done"), os.path.join(runs, "live")
    train = subprocess.run(
        [DTRAIN, "train", "--dataset", "synthetic", "--synthetic-size", "1024", "--epochs", "1",
         "--log-every", "2", "--eval-every", "4", "--workers", "2", "--progress", "off",
         "--run-dir", done, "--run-timeline", "--machine", MACHINE], capture_output=True, text=True,
        timeout=300)
    check(train.returncode == 0, "train --run-dir: " + train.stderr)
    # The running run: the first lines of the finished one's metrics, then half a line.
    os.makedirs(live)
    shutil.copy(os.path.join(done, "config.toml"), live)
    lines = open(os.path.join(done, "metrics.jsonl")).read().splitlines(keepends=True)
    with open(os.path.join(live, "metrics.jsonl"), "w") as f:
        f.writelines(lines[:5])
        f.write(lines[5][:20])
    # A run that has only started: its configuration, no metrics file yet.
    os.makedirs(os.path.join(runs, "starting"))
    shutil.copy(os.path.join(done, "config.toml"), os.path.join(runs, "starting"))

    server = subprocess.Popen([DTRAIN, "dashboard", runs, "--port", "0"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().strip().split(" ", 1)[1]
        check(url.startswith("http://127.0.0.1:"), "the URL printed: " + url)
        check_page(url, done, live)
        check_follows_growth(url, live, lines[5])
        check_bad_arguments(url)
    finally:
        server.terminate()
        server.wait(timeout=30)
    shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


def check_page(url, done, live):
    # One start for both (each takes seconds): the DOM on stdout, the picture in the file.
    dom = chromium("--window-size=1400,1300", "--screenshot=" + SCREENSHOT, "--dump-dom", url)
    check(dom.returncode == 0, "chromium --dump-dom: " + dom.stderr[-2000:])
    check(os.path.exists(SCREENSHOT) and os.path.getsize(SCREENSHOT) > 10000,
          "chromium --screenshot: " + dom.stderr[-2000:])
    cells = Cells()
    cells.feed(dom.stdout)
    for name, d in (("done", done), ("live", live)):
        shown = cells.runs.get(name)
        check(shown is not None, f"run {name} is not on the page: {dom.stdout[:3000]}")
        if not shown:
            continue
        recs = records(os.path.join(d, "metrics.jsonl"))
        for field, key in (("step", "step"), ("loss", "loss"), ("test_accuracy", "test_accuracy"),
                           ("lr", "lr"), ("time_s", "time_s")):
            want = last(recs, key)
            got = shown.get(field)
            check(want is not None and got not in (None, "–") and float(got) == float(want),
                  f"{name}: {field} shows {got}, the file's last {key} is {want}")
        check(shown.get("state") == ("finished" if name == "done" else "running"),
              f"{name}: state {shown.get('state')}")
        check(name in cells.phases, f"{name}: no chart of the step's phases")
        per_rank = [r for r in recs if "rank_work_ms" in r][-1]
        check(cells.ranks.get(name) == list(zip(per_rank["rank_work_ms"], per_rank["rank_wait_ms"])),
              f"{name}: per-rank bars {cells.ranks.get(name)}, the file's last window {per_rank}")
    starting = cells.runs.get("starting", {})
    check(starting.get("state") == "running" and starting.get("step") == "–",
          f"a run without metrics yet: {starting}")
    result = json.load(open(os.path.join(done, "result.json")))
    got = cells.runs.get("done", {}).get("predicted_samples_per_s")
    check(got is not None and float(got) == float(result["predicted_samples_per_s"]),
          f"done: predicted samples/s shows {got}, result.json has {result['predicted_samples_per_s']}")
    got = cells.runs.get("done", {}).get("samples_per_s")
    check(got is not None and float(got) == float(result["samples_per_s"]),
          f"done: samples/s shows {got}, result.json has {result['samples_per_s']}")
    for chart in ("loss", "test_accuracy", "eval_loss", "samples_per_s", "lr"):
        check(chart in cells.charts, f"no {chart} chart")


def get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.load(r)


def check_follows_growth(url, live, rest_of_line):
    api = url + "api/run/live/metrics"
    first = get(api + "?since=0")
    check(len(first["records"]) == 5, f"5 complete lines, got {len(first['records'])}")
    with open(os.path.join(live, "metrics.jsonl"), "a") as f:
        f.write(rest_of_line[20:])
    more = get(f"{api}?since={first['next']}")
    check([r.get("step") for r in more["records"]] == [json.loads(rest_of_line).get("step")],
          "the completed line comes next: " + json.dumps(more))
    check(get(url + "api/run/live/result") is None, "a running run has no result")


def check_bad_arguments(url):
    missing = subprocess.run([DTRAIN, "dashboard", "/nonexistent/runs"], capture_output=True,
                             text=True, timeout=30)
    check(missing.returncode == 2 and missing.stderr.count("\n") == 1 and
          "/nonexistent/runs: no such run directory" in missing.stderr,
          f"missing directory: exit {missing.returncode}, {missing.stderr!r}")
    port = url.rstrip("/").rsplit(":", 1)[1]
    busy = subprocess.run([DTRAIN, "dashboard", "--port", port, "."], capture_output=True,
                          text=True, timeout=30)
    check(busy.returncode == 2 and busy.stderr.count("\n") == 1 and "cannot listen" in busy.stderr,
          f"port in use: exit {busy.returncode}, {busy.stderr!r}")


if __name__ == "__main__":
    sys.exit(main())
