"""Time gpu_facts on this host: the probes in-process, and the whole module through Ansible.

    python3 bench/gpu_facts.py [--runs N] [--host-root /] [--no-ansible]

Prints the median, min and max of N runs of each, the number of commands the probes ran, and
what was found (GPU count, driver), so figures from different hosts can be set side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
LINK = os.path.join(COLLECTIONS, "ansible_collections", "gpufleet", "nvidia")


def _collection_on_path() -> None:
    if not os.path.islink(LINK):
        os.makedirs(os.path.dirname(LINK), exist_ok=True)
        os.symlink(ROOT, LINK)
    sys.path.insert(0, COLLECTIONS)


def _summary(values: list[float]) -> str:
    return "median %7.1f ms   min %7.1f   max %7.1f   (n=%d)" % (
        statistics.median(values) * 1000, min(values) * 1000, max(values) * 1000, len(values))


def bench_probes(runs: int, host_root: str) -> dict:
    """Time gather_facts() in this process; count the commands it runs."""
    from ansible_collections.gpufleet.nvidia.plugins.module_utils import _gpu_facts as gf

    times, commands, facts = [], 0, {}
    for _run in range(runs):
        host = gf.make_host(host_root)
        calls = []
        real_run = host.run

        def counting_run(argv):
            calls.append(argv)
            return real_run(argv)

        host.run = counting_run
        start = time.perf_counter()
        facts = gf.gather_facts(host)
        times.append(time.perf_counter() - start)
        commands = len(calls)
    print("probes in-process : %s   commands per run: %d" % (_summary(times), commands))
    return facts


def bench_module(runs: int, host_root: str) -> None:
    """Time the module end to end as a user runs it: `ansible localhost -m gpufleet.nvidia.gpu_facts`."""
    ansible = shutil.which("ansible") or os.path.join(ROOT, ".venv", "bin", "ansible")
    if not os.path.exists(ansible):
        print("module via ansible: skipped (no ansible command here)")
        return
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_PIPELINING="1")
    argv = [ansible, "localhost", "-c", "local", "-m", "gpufleet.nvidia.gpu_facts",
            "-a", "host_root=%s" % host_root, "-o",
            # this Python, not whatever interpreter discovery would find first on PATH
            "-e", "ansible_python_interpreter=%s" % sys.executable]
    times = []
    for _run in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            print("module via ansible: FAILED\n" + proc.stdout + proc.stderr)
            return
    print("module via ansible: %s   (process start, AnsiballZ and facts)" % _summary(times))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--host-root", default="/")
    parser.add_argument("--no-ansible", action="store_true", help="time the probes only")
    args = parser.parse_args()
    _collection_on_path()
    print("gpu_facts on %s (%s)" % (os.uname().nodename, os.uname().release))
    facts = bench_probes(args.runs, args.host_root)
    if not args.no_ansible:
        bench_module(args.runs, args.host_root)
    driver = facts.get("driver", {})
    print("found: %s GPU(s) %s; driver %s (%s, %s); os %s" % (
        facts.get("gpu_count"),
        json.dumps(sorted({g.get("name") for g in facts.get("gpus", [])})),
        driver.get("version"), driver.get("flavor"), driver.get("source"),
        facts.get("os", {}).get("pretty_name")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
