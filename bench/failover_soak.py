#!/usr/bin/env python3
"""The failover torture tests run for minutes instead of CI's seconds: a long soak of each
replicated engine under writers that log what was acknowledged to them.

    sudo bench/failover_soak.py [--minutes 3] [etcd] [redis] [postgres]

Each engine's test (tests/test_etcd_failover.py, test_redis_failover.py with
wait-replicas=1, test_pg_failover.py) runs with TIERFS_TORTURE_SECONDS set: two mounts'
writers (fsync'd creates and appends, renames, unlinks) while the leader is SIGKILLed every
5 s (etcd), 8 s (Redis) or 10 s (PostgreSQL), then everything acknowledged is checked
present exactly once and fsck run. The test's own assertions decide pass or fail; its
report lines (kills, operations, failures, unavailability after a kill) go to the
"failover-soak" section of docs/benchmarks.md."""
import argparse
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))
from doc_section import write_section  # noqa: E402

BEGIN, END = "<!-- BEGIN failover-soak (bench/failover_soak.py) -->", "<!-- END failover-soak (bench/failover_soak.py) -->"
TESTS = {
    "etcd": ("test_etcd_failover.py", "EtcdFailoverTest", "etcd, three members"),
    "redis": ("test_redis_failover.py", "SentinelFailoverTest", "Redis under Sentinel, wait-replicas=1"),
    "postgres": ("test_pg_failover.py", "PgFailoverTest.test_writers_lose_nothing_while_the_primary_is_killed",
                 "PostgreSQL under Patroni, three members"),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=3)
    ap.add_argument("engines", nargs="*", help="some of %s (default: all)" % ", ".join(TESTS))
    a = ap.parse_args()
    for name in a.engines:
        if name not in TESTS:
            ap.error("unknown engine %r: expected some of %s" % (name, ", ".join(TESTS)))
    env = dict(os.environ, TIERFS_TORTURE_SECONDS=str(a.minutes * 60),
               TIERFS_BIN=os.environ.get("TIERFS_BIN", os.path.join(REPO, "build", "src", "cmd", "tierfs")))
    rows = []
    for name in a.engines or list(TESTS):
        script, case, title = TESTS[name]
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, os.path.join(REPO, "tests", script), "-v", case], env=env,
                           capture_output=True, text=True, timeout=a.minutes * 60 + 900)
        took = time.monotonic() - t0
        report = [line.strip() for line in r.stderr.splitlines() if "leader kills" in line]
        verdict = "passed" if r.returncode == 0 else "FAILED"
        why = ""
        if r.returncode != 0:
            errors = [line.strip() for line in r.stderr.splitlines() if line.startswith(("AssertionError", "RuntimeError"))]
            why = " Failed: " + ("; ".join(errors) if errors else r.stderr[-500:])
        print("%s: %s in %.0f s\n%s\n%s" % (title, verdict, took, "\n".join(report), r.stderr[-3000:] if why else ""),
              file=sys.stderr)
        rows.append("- **%s**: %s (%.0f s). %s%s" % (title, verdict, took,
                                                      " ".join(report) if report else "No report line.", why))
    # Engines not run this time keep their rows from the last run, marked as such.
    doc = os.path.join(REPO, "docs", "benchmarks.md")
    ran = {TESTS[name][2] for name in (a.engines or list(TESTS))}
    kept = []
    if os.path.exists(doc):
        text = open(doc).read()
        if BEGIN in text and END in text:
            for line in text[text.index(BEGIN):text.index(END)].splitlines():
                title = line[4:].split("**")[0] if line.startswith("- **") else None
                if title and title not in ran:
                    kept.append(line if "(an earlier run)" in line else line + " (an earlier run)")
    rows = kept + rows
    cmd = "sudo bench/failover_soak.py " + " ".join(sys.argv[1:])
    section = "\n".join([BEGIN, "## Failover soak: leaders killed for minutes under two mounts' writers", "",
                         "`%s` (%s, %d cores). Each engine's failover test run for %.0f minutes instead of CI's"
                         " tens of seconds; \"passed\" means every acknowledged operation was there exactly once,"
                         " fsck was clean, each writer made progress after every kill and no operation waited"
                         " past the META-URL's timeout." % (cmd, time.strftime("%Y-%m-%d"), os.cpu_count(),
                                                            a.minutes), ""] + rows + [END])
    write_section(doc, BEGIN, END, section)
    print(section)
    return 0 if all("passed" in r for r in rows if "(an earlier run)" not in r) else 1


if __name__ == "__main__":
    sys.exit(main())
