"""Time gpu_facts on this host: the probes in-process, and the whole module through Ansible.

    python3 bench/gpu_facts.py [--runs N] [--host-root /] [--no-ansible]
                               [--collections DIR] [--module ANSIBALLZ] [--json]

Prints the median, min and max of N runs of each, the number of commands the probes ran, and
what was found (GPU count, driver), so figures from different hosts can be set side by side.

bench/converge.py also runs it inside the lab nodes (through `podman exec`), where Ansible is not
installed: --collections names the directory that holds ansible_collections/ (there, the exploded
AnsiballZ payload of the module), --module times that AnsiballZ file run as a process (the module
as Ansible runs it on a node, without the transport), and --json prints one JSON object.
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


def _collection_on_path(collections: str | None) -> None:
    if collections:
        sys.path.insert(0, collections)
        return
    if not os.path.islink(LINK):
        os.makedirs(os.path.dirname(LINK), exist_ok=True)
        os.symlink(ROOT, LINK)
    sys.path.insert(0, COLLECTIONS)


def _stats(values: list[float]) -> dict:
    return {
        "median_s": statistics.median(values),
        "min_s": min(values),
        "max_s": max(values),
        "n": len(values),
    }


def _summary(values: list[float]) -> str:
    return "median %7.1f ms   min %7.1f   max %7.1f   (n=%d)" % (
        statistics.median(values) * 1000, min(values) * 1000, max(values) * 1000, len(values))


def _counting(run, calls: list):
    """``run``, recording each command it is given in ``calls``."""

    def counting_run(argv, *more, **kw):
        calls.append(argv)
        return run(argv, *more, **kw)

    return counting_run


def bench_probes(runs: int, host_root: str, out: dict) -> dict:
    """Time gather_facts() in this process; count the commands it runs."""
    from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import host as common_host
    from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import facts as gf

    times, commands, facts = [], 0, {}
    for _run in range(runs):
        host = common_host.Host.for_module(None, host_root, 60)
        calls = []
        host.run = _counting(host.run, calls)
        start = time.perf_counter()
        facts = gf.gather_facts(host)
        times.append(time.perf_counter() - start)
        commands = len(calls)
    out["probes"] = dict(_stats(times), commands=commands)
    if not out.get("quiet"):
        print("probes in-process : %s   commands per run: %d" % (_summary(times), commands))
    return facts


def bench_ansiballz(runs: int, path: str, out: dict) -> None:
    """Time the module's AnsiballZ file run as a process: the module on a node, minus the transport."""
    times = []
    for _run in range(runs):
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, path], capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - start)
        if proc.returncode != 0 or '"failed": true' in proc.stdout:
            out["module_process"] = {"error": (proc.stdout + proc.stderr)[-2000:]}
            if not out.get("quiet"):
                print("module as a process: FAILED\n" + proc.stdout + proc.stderr)
            return
    out["module_process"] = _stats(times)
    if not out.get("quiet"):
        print("module as a process: %s   (AnsiballZ: unzip, imports, probes, JSON)" % _summary(times))


def bench_module(runs: int, host_root: str, out: dict) -> None:
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
    out["module_via_ansible"] = _stats(times)
    if not out.get("quiet"):
        print("module via ansible: %s   (process start, AnsiballZ and facts)" % _summary(times))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--host-root", default="/")
    parser.add_argument("--no-ansible", action="store_true", help="time the probes only")
    parser.add_argument("--collections", help="the directory holding ansible_collections/ (default: the source tree)")
    parser.add_argument("--module", help="an AnsiballZ file of gpu_facts to time as a process")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the text")
    args = parser.parse_args()
    _collection_on_path(args.collections)
    out = {"host": os.uname().nodename, "kernel": os.uname().release, "quiet": args.json}
    if not args.json:
        print("gpu_facts on %s (%s)" % (out["host"], out["kernel"]))
    facts = bench_probes(args.runs, args.host_root, out)
    if args.module:
        bench_ansiballz(args.runs, args.module, out)
    if not args.no_ansible:
        bench_module(args.runs, args.host_root, out)
    driver = facts.get("driver", {})
    out["found"] = {
        "gpu_count": facts.get("gpu_count"),
        "gpus": sorted({g.get("name") for g in facts.get("gpus", [])}),
        "driver": driver.get("version"),
        "driver_flavor": driver.get("flavor"),
        "driver_source": driver.get("source"),
        "os": facts.get("os", {}).get("pretty_name"),
    }
    if args.json:
        del out["quiet"]
        print(json.dumps(out, sort_keys=True))
        return 0
    print("found: %s GPU(s) %s; driver %s (%s, %s); os %s" % (
        facts.get("gpu_count"),
        json.dumps(out["found"]["gpus"]),
        driver.get("version"), driver.get("flavor"), driver.get("source"),
        out["found"]["os"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
