"""The cost of a run past what the lab can hold: site.yml over a simulated fleet (`make bench-scale`).

Run by bench/scale.sh with the virtual environment's Python; needs no root, no podman and no
network, and changes nothing on this machine outside .cache/bench/scale and a temporary folder.

The fleet: N inventory hosts, all in the group ``gpu_nodes`` (the cluster layer plans from it),
on ``ansible_connection: local``, each reading its own copy of one of the captured host trees of
tests/unit/fixtures/hosts through ``discover_host_root`` / ``validate_host_root`` (one copy per
node, made once per bench run from the fixture materialized by tests/unit/hostfs.py). The
profiles take turns (PROFILES below): one and two H200 with the driver pre-installed, two L40S
with the driver from packages, an HGX H100 x8 on RKE2 with a MIG config, a V100 with nouveau, a
node without GPU, a node left to the GPU Operator; they differ in declared drivers, GPU counts,
sharing configs, waivers and the toolkit.

What runs: ``playbooks/site.yml --skip-tags driver,toolkit,runtime`` with
``gpufleet_cluster_layer: gpu_operator``, ``gpu_operator_apply: false`` and a render directory
(the plan is built from the whole fleet and written as files; nothing is applied),
``validate_cluster: false``, preflight on, discovery's validation standing for every node (no host layer runs),
the report written to a temporary folder (``report_fail_on: never``: the captures have no
nvidia-smi to run, so their host checks fail, and the report says so). Next to it, at the same
size, the floor: bench/scale-floor.yml, one ``ping`` per host and no facts; and the hand-written
playbook, bench/scale-hand.yml: the same reads and node checks as site.yml's (the collection's
gpu_facts with validation and preflight, one task per node) and one file of every node's
verdicts, which is what a careful engineer would write by hand without the collection's house.

The driver and toolkit layers are not in it: their modules install and read packages, services and
files of the machine they run on, and every simulated node is this machine (they have no host
root to read a captured tree under, as discovery and validation have).

Figures per size and playbook: wall time; controller CPU (the ansible-playbook process tree:
the CPU of this process's finished children, bench/converge.py's measure, minus the module
processes); module CPU (each module process on a "node", measured by the nodes' interpreter, a
bash wrapper around the virtual environment's Python that records its children's CPU with
``times``); the controller's peak memory (VmHWM of the ansible-playbook process, and the peak of
the summed PSS of its process tree, workers included, sampled every 0.25 s); tasks and module
runs per node (bench/callback_plugins/bench_count.py). Per node: the figure divided by N, and the
marginal cost of a node (the slope from the previous size), which does not carry the run's fixed
cost (Python's start, loading the plays) and shows a cost that grows faster than the fleet.

Environment knobs:

    BENCH_SCALE_SIZES="8 32 128 256"  fleet sizes (512 takes about as long again as all of these)
    BENCH_SCALE_FORKS=16              forks (the work is CPU bound on the controller here: every
                                      "node" is this machine; more forks than cores only add
                                      worker processes)
    BENCH_SCALE_RUNS=1                runs per size and playbook (the tables show medians; issue 30's
                                      targets, median, min and max of the runs)
    BENCH_SCALE_REF=""                a git ref to measure (its tree, exported with git archive)
                                      instead of the working tree, e.g. BENCH_SCALE_REF=HEAD
    BENCH_SCALE_BASELINE=""           a git ref measured too, in the same runs, each of its runs
                                      next to one of the measured tree's (the order alternates):
                                      before and after on the same, possibly busy, machine
    BENCH_SCALE_NAME=scale-latest     bench/results/<name>.md and .json
    BENCH_SCALE_PYSPY=""              a py-spy binary: also record, in a run of its own after the
                                      measured ones, where the controller's CPU goes at each size
                                      (py-spy record --subprocesses, collapsed stacks, under
                                      .cache/bench/scale/profiles/); not installed by the bench
    BENCH_SCALE_PYSPY_SIZES=""        the sizes py-spy records (all of BENCH_SCALE_SIZES when empty)
"""

from __future__ import annotations

import datetime
import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from converge import (  # noqa: E402  the bench's shared helpers
    BENCH,
    RESULTS,
    ROOT,
    VENV_BIN,
    Bench,
    BenchError,
    fmt_ratio,
    fmt_s,
    log,
    median,
    sh,
    short,
    table,
)

sys.path.insert(0, os.path.join(ROOT, "tests", "unit"))
import hostfs  # noqa: E402  the captures' frozen trees, made real

CACHE = os.path.join(ROOT, ".cache", "bench", "scale")
FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures", "hosts")
PYTHON = os.path.join(VENV_BIN, "python")
SKIP = ("--skip-tags", "driver,toolkit,runtime")

# The node profiles, in turn: (group, fixture, group variables). Every node declares its
# nvidia_driver_method (the cluster plan requires it); waivers are those a real site with these
# machines would need for preflight to let them through (the captures' kernels have no headers
# installed, the fabric manager of the HGX board answers no command under a host root).
PROFILES = (
    ("scale_h200", "ubuntu2404-h200-preinstalled",
     {"nvidia_driver_method": "preinstalled", "nvidia_driver_version": "580"}),
    ("scale_h200x2_ts4", "ubuntu2404-h200x2-preinstalled",
     {"nvidia_driver_method": "preinstalled", "nvidia_driver_version": "580.159.04",
      "gpufleet_sharing_config": "ts-4", "validate_gpu_count": 2}),
    ("scale_l40s_package", "debian12-l40s-x2-package",
     {"nvidia_driver_method": "package", "nvidia_driver_version": "550", "container_toolkit_version": "1.17.8",
      "container_toolkit_runtime": "docker", "discover_waive": ["kernel_headers"]}),
    ("scale_nogpu", "debian12-nogpu", {"nvidia_driver_method": "package"}),
    # a node left to the GPU Operator has no host driver (preflight blocks one that has: driver_not_package_owned)
    ("scale_p100_operator", "ubuntu2204-p100-nodriver", {"nvidia_driver_method": "operator"}),
    ("scale_h100x8_rke2_mig", "rocky9-h100x8-rpm-rke2",
     {"nvidia_driver_method": "preinstalled", "nvidia_driver_version": "570.172.08",
      "container_toolkit_runtime": "rke2", "gpufleet_mig_config": "all-1g.10gb",
      "discover_waive": ["fabric_manager_missing"]}),
    ("scale_v100_nouveau", "ubuntu2204-v100-nouveau",
     {"nvidia_driver_method": "package", "nvidia_driver_version": "580", "discover_waive": ["kernel_headers"]}),
    ("scale_h200x2_ts2_no_toolkit", "ubuntu2404-h200x2-preinstalled",
     {"nvidia_driver_method": "preinstalled", "container_toolkit_enabled": False, "gpufleet_sharing_config": "ts-2"}),
)

FLEET_VARS = {
    "ansible_connection": "local",
    "gpufleet_become": False,
    "gpufleet_cluster_layer": "gpu_operator",
    "gpu_operator_apply": False,
    "gpufleet_mig_strategy": "single",
    "gpufleet_sharing_configs": {
        "ts-2": {"strategy": "time-slicing", "replicas": 2},
        "ts-4": {"strategy": "time-slicing", "replicas": 4},
    },
    "validate_cluster": False,
    "discover_preflight": True,
    "report_fail_on": "never",
}

# The nodes' interpreter: the module runs under it as it would on a node, and what it cost (the
# wrapper's own CPU, then its children's: the module and what the module ran) is appended to a
# file named after the wrapper's PID, two lines of `times` per module run.
INTERPRETER = """#!/bin/bash
# Written by bench/scale.py: the interpreter of the scale bench's simulated nodes.
%s "$@"
rc=$?
if [ -n "${BENCH_SCALE_MODULE_CPU:-}" ]; then
  times >> "$BENCH_SCALE_MODULE_CPU/cpu.$$"
fi
exit $rc
"""


def env_list(name, default):
    return os.environ.get(name, default).split()


class Config(object):
    def __init__(self):
        self.sizes = sorted(set(int(s) for s in env_list("BENCH_SCALE_SIZES", "8 32 128 256")))
        self.forks = int(os.environ.get("BENCH_SCALE_FORKS", "16"))
        self.runs = int(os.environ.get("BENCH_SCALE_RUNS", "1"))
        self.ref = os.environ.get("BENCH_SCALE_REF", "")
        self.baseline = os.environ.get("BENCH_SCALE_BASELINE", "")
        self.name = os.environ.get("BENCH_SCALE_NAME", "scale-latest")
        self.pyspy = os.environ.get("BENCH_SCALE_PYSPY", "")
        self.pyspy_sizes = sorted(set(int(s) for s in env_list("BENCH_SCALE_PYSPY_SIZES", ""))) or self.sizes
        if not self.sizes or min(self.sizes) < 1 or self.runs < 1 or self.forks < 1:
            raise BenchError("BENCH_SCALE_SIZES must list sizes of 1 or more, BENCH_SCALE_RUNS and _FORKS be 1 or more")
        if self.pyspy and not shutil.which(self.pyspy):
            raise BenchError("BENCH_SCALE_PYSPY: %r is not an executable" % self.pyspy)

    def as_dict(self):
        return {"sizes": self.sizes, "forks": self.forks, "runs": self.runs, "ref": self.ref or "working tree",
                "baseline": self.baseline or None, "pyspy": bool(self.pyspy), "pyspy_sizes": self.pyspy_sizes}


def times_cpu(path):
    """CPU seconds in a file of `times` lines ("0m0.012s 0m0.004s"): user + system, every line."""
    total = 0.0
    with open(path) as handle:
        for line in handle:
            for field in line.split():
                minutes, _sep, seconds = field.rstrip("s").partition("m")
                total += int(minutes) * 60 + float(seconds)
    return total


def proc_tree(root):
    """PIDs of ``root`` and its descendants, from /proc."""
    children = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as handle:
                text = handle.read()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        children.setdefault(int(fields[1]), []).append(int(stat.split("/")[2]))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def status_kib(pid, key):
    try:
        with open("/proc/%d/status" % pid) as handle:
            for line in handle:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def pss_kib(pid):
    try:
        with open("/proc/%d/smaps_rollup" % pid) as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Scale(object):
    def __init__(self, cfg):
        self.cfg = cfg
        # what is measured: the working tree (or BENCH_SCALE_REF) and BENCH_SCALE_BASELINE, each
        # (its source, its collections path)
        self.trees = {"site": (ROOT, os.path.join(ROOT, ".cache", "collections"))}
        self.revs = {}  # ref -> the commit exported, resolved when it is exported
        self.logs = os.path.join(CACHE, "logs")
        self.tmp = None
        self.log_seq = 0
        self.notes = []
        self.results = {"sizes": []}

    # --- setup ---------------------------------------------------------------------------------

    def setup(self):
        for path in (CACHE, self.logs, RESULTS):
            os.makedirs(path, exist_ok=True)
        for name in os.listdir(self.logs):
            os.unlink(os.path.join(self.logs, name))
        self.tmp = tempfile.mkdtemp(prefix="gpufleet-scale-")
        if self.cfg.ref:
            self.trees["site"] = self.export(self.cfg.ref, "src")
        if self.cfg.baseline:
            self.trees["baseline"] = self.export(self.cfg.baseline, "baseline")
        if not self.cfg.ref:
            proc = sh(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], check=False)
            self.revs["HEAD"] = proc.stdout.strip() if proc.returncode == 0 else "?"
        interp = os.path.join(CACHE, "python-node")
        with open(interp, "w") as handle:
            handle.write(INTERPRETER % shlex.quote(PYTHON))
        os.chmod(interp, 0o755)
        self.interpreter = interp

    def export(self, ref, name):
        """The tree of ``ref`` (git archive) under .cache/bench/scale/NAME, and a collections path to it."""
        src = os.path.join(CACHE, name)
        shutil.rmtree(src, ignore_errors=True)
        os.makedirs(src)
        commit = sh(["git", "-C", ROOT, "rev-parse", "--verify", ref + "^{commit}"]).stdout.strip()
        self.revs[ref] = commit[:7]
        archive = subprocess.Popen(["git", "-C", ROOT, "archive", commit], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", src], stdin=archive.stdout, check=True)
        if archive.wait() != 0:
            raise BenchError("git archive %s failed" % ref)
        collections = os.path.join(CACHE, name + "-collections")
        link = os.path.join(collections, "ansible_collections", "gpufleet", "nvidia")
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(src, link)
        return src, collections

    def hosts(self, size):
        """One host root per node, copied from its profile's materialized fixture."""
        roots = os.path.join(self.tmp, "hosts")
        os.makedirs(roots, exist_ok=True)
        made = {}
        for index in range(size):
            group, fixture, dummy = PROFILES[index % len(PROFILES)]
            name = "gpu-%04d" % (index + 1)
            dest = os.path.join(roots, name)
            if not os.path.isdir(dest):
                if fixture not in made:
                    made[fixture] = hostfs.materialize(os.path.join(FIXTURES, fixture, "root"))
                shutil.copytree(made[fixture], dest, symlinks=True)
            yield name, group, dest

    def inventory(self, size):
        path = os.path.join(CACHE, "inventories", str(size))
        os.makedirs(path, exist_ok=True)
        groups = {}
        for name, group, root in self.hosts(size):
            groups.setdefault(group, {})[name] = {"discover_host_root": root, "validate_host_root": root}
        children = {}
        for group, dummy, group_vars in PROFILES:
            if group in groups:
                children[group] = {"vars": group_vars, "hosts": groups[group]}
        fleet_vars = dict(FLEET_VARS, ansible_python_interpreter=self.interpreter)
        inventory = {"all": {"vars": fleet_vars, "children": {"gpu_nodes": {"children": children}}}}
        with open(os.path.join(path, "hosts.yml"), "w") as handle:
            handle.write("# Written by bench/scale.py: %d simulated nodes on the local connection.\n" % size)
            json.dump(inventory, handle, indent=1, sort_keys=True)
        return os.path.join(path, "hosts.yml")

    # --- one measured run ------------------------------------------------------------------------

    def env(self, count_file, module_cpu, collections):
        env = dict(os.environ)
        env.pop("ANSIBLE_CONFIG", None)
        env.update({
            "PATH": VENV_BIN + os.pathsep + env.get("PATH", ""),
            "ANSIBLE_COLLECTIONS_PATH": collections,
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORKS": str(self.cfg.forks),
            "ANSIBLE_PIPELINING": "1",
            "ANSIBLE_RETRY_FILES_ENABLED": "0",
            "ANSIBLE_LOCALHOST_WARNING": "0",
            "ANSIBLE_HOME": os.path.join(self.tmp, "ansible-home"),
            "ANSIBLE_CALLBACK_PLUGINS": os.path.join(BENCH, "callback_plugins"),
            "ANSIBLE_CALLBACKS_ENABLED": "bench_count",
            "BENCH_COUNT_FILE": count_file,
            "BENCH_SCALE_MODULE_CPU": module_cpu,
        })
        return env

    def run(self, what, size, inventory, extra=(), profile=False):
        """One run of ``what`` (site, baseline, floor, hand) on ``size`` nodes; its figures."""
        src, collections = self.trees["baseline" if what == "baseline" else "site"]
        self.log_seq += 1
        tag = "%03d-%s-%d%s" % (self.log_seq, what, size, "-pyspy" if profile else "")
        logfile = os.path.join(self.logs, tag + ".log")
        count_file = os.path.join(self.logs, tag + ".counts.json")
        work = tempfile.mkdtemp(prefix=tag + "-", dir=self.tmp)
        playbook = {"floor": os.path.join(BENCH, "scale-floor.yml"), "hand": os.path.join(BENCH, "scale-hand.yml")}.get(
            what, os.path.join(src, "playbooks", "site.yml"))
        extra = tuple(extra) + (() if what in ("floor", "hand") else SKIP)
        if what == "hand":
            os.makedirs(os.path.join(work, "report"), exist_ok=True)

        module_cpu = os.path.join(work, "module-cpu")
        os.makedirs(module_cpu)
        argv = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", inventory, playbook,
                "-e", "report_dir=%s" % os.path.join(work, "report"),
                "-e", "gpu_operator_render_dir=%s" % os.path.join(work, "render")] + list(extra)
        if profile:
            out = os.path.join(CACHE, "profiles", "%s-%d.txt" % (what, size))
            os.makedirs(os.path.dirname(out), exist_ok=True)
            argv = [self.cfg.pyspy, "record", "--subprocesses", "--nonblocking", "--rate", "50", "--format", "raw",
                    "--output", out, "--"] + argv
        with open(logfile, "w") as handle:
            handle.write("$ %s\n" % " ".join(shlex.quote(a) for a in argv))
            handle.flush()
            cpu0 = Bench.controller_cpu()
            start = time.perf_counter()
            proc = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, env=self.env(count_file, module_cpu, collections),
                                    cwd=self.tmp)
            hwm, pss = 0, 0
            while proc.poll() is None:
                hwm = max(hwm, status_kib(proc.pid, "VmHWM") or 0)
                pss = max(pss, sum(pss_kib(pid) for pid in proc_tree(proc.pid)))
                time.sleep(0.25)
            wall = time.perf_counter() - start
            cpu = Bench.controller_cpu() - cpu0
        if proc.returncode != 0:
            with open(logfile) as handle:
                tail = handle.read()[-4000:]
            raise BenchError("%s on %d nodes failed (exit %d), log %s:\n%s" % (what, size, proc.returncode, logfile, tail))
        modules = sum(times_cpu(path) for path in glob.glob(os.path.join(module_cpu, "cpu.*")))
        module_runs = sum(1 for path in glob.glob(os.path.join(module_cpu, "cpu.*")) for dummy in open(path)) // 2
        with open(count_file) as handle:
            counts = json.load(handle)
        result = {
            "wall_s": wall,
            "tree_cpu_s": cpu,
            "module_cpu_s": modules,
            "controller_cpu_s": cpu - modules,
            "module_processes": module_runs,
            "peak_rss_mib": hwm / 1024.0,
            "peak_tree_pss_mib": pss / 1024.0,
            "counts": self.per_node(counts, size),
            "log": logfile,
        }
        if what in ("site", "baseline"):
            result["fleet"] = self.check_site(work, size)
        shutil.rmtree(work, ignore_errors=True)
        return result

    @staticmethod
    def per_node(counts, size):
        hosts = {h: c for h, c in counts.get("hosts", {}).items() if h != "localhost"}
        out = {key: sum(c[key] for c in hosts.values()) / float(size)
               for key in ("tasks", "modules", "skipped", "changed", "failed")}
        out["task_count"] = len(counts.get("tasks", []))
        out["tasks_total_s"] = counts.get("tasks_total_s")
        out["top_tasks"] = counts.get("tasks", [])[:10]
        return out

    @staticmethod
    def check_site(work, size):
        """That the run did its work for every node: the report has them all, the plan labels them."""
        with open(os.path.join(work, "report", "gpufleet-report.json")) as handle:
            report = json.load(handle)
        with open(os.path.join(work, "render", "node-labels.yaml")) as handle:
            labels = yaml.safe_load(handle)
        nodes = report.get("nodes", [])
        if len(nodes) != size:
            raise BenchError("the report of a %d-node run has %d nodes" % (size, len(nodes)))
        # render mode reports the change as applied (it applied nothing: gpu_operator_apply is false)
        state = report.get("run", {}).get("cluster_change", {}).get("state")
        if state != "applied":
            raise BenchError("the cluster change of a %d-node run is %r: %s" % (
                size, state, report.get("run", {}).get("cluster_change", {}).get("msg")))
        return {
            "status": report.get("status"),
            "summary": report.get("summary"),
            "cluster_change": state,
            "labelled_nodes": len(labels.get("items") or []),
        }

    # --- the whole bench ---------------------------------------------------------------------------

    def bench(self):
        started = time.time()
        self.setup()
        log("scale bench: sizes %s, forks %d, %d run(s) each, measuring %s"
            % (" ".join(map(str, self.cfg.sizes)), self.cfg.forks, self.cfg.runs, self.cfg.ref or "the working tree"))
        inventories = {n: self.inventory(n) for n in self.cfg.sizes}
        compared = ["site"] + (["baseline"] if "baseline" in self.trees else [])
        measured = ["floor", "hand"] + compared
        for what in measured[1:]:
            log("warm-up: %s on %d nodes" % (what, self.cfg.sizes[0]))
            self.run(what, self.cfg.sizes[0], inventories[self.cfg.sizes[0]])
        turn = 0
        for n in self.cfg.sizes:
            row = dict((what, []) for what in measured)
            row["n"] = n
            for run in range(self.cfg.runs):
                # the floor and the hand-written playbook first, then site.yml and the baseline in
                # turn, each run starting with the other
                order = ["floor", "hand"] + (compared if turn % 2 == 0 else compared[::-1])
                turn += 1
                for what in order:
                    row[what].append(self.run(what, n, inventories[n]))
                log("%d nodes, run %d/%d: %s" % (n, run + 1, self.cfg.runs, "; ".join(
                    "%s %.1fs (controller CPU %.1fs, modules %.1fs, peak RSS %.0f MiB)" % (
                        what, row[what][-1]["wall_s"], row[what][-1]["controller_cpu_s"], row[what][-1]["module_cpu_s"],
                        row[what][-1]["peak_rss_mib"]) for what in measured)))
            for what in measured:
                row[what + "_median"] = {key: median([r[key] for r in row[what]]) for key in
                                         ("wall_s", "controller_cpu_s", "module_cpu_s", "tree_cpu_s", "peak_rss_mib",
                                          "peak_tree_pss_mib", "module_processes")}
            self.results["sizes"].append(row)
        if self.cfg.pyspy:
            for n in [size for size in self.cfg.sizes if size in self.cfg.pyspy_sizes]:
                for what in compared:
                    log("py-spy: %s on %d nodes" % (what, n))
                    self.run(what, n, inventories[n], profile=True)
        self.results["meta"] = self.meta(started)
        self.results["config"] = self.cfg.as_dict()
        self.results["notes"] = self.notes
        return self.results

    def meta(self, started):
        def out(argv):
            proc = sh(argv, check=False)
            return proc.stdout.strip() if proc.returncode == 0 else "?"

        rev = self.revs.get(self.cfg.ref or "HEAD", "?")
        baseline = self.revs.get(self.cfg.baseline)
        dirty = "" if self.cfg.ref or not out(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"]) \
            else " + uncommitted changes"
        knobs = " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in sorted(os.environ.items())
                         if k.startswith("BENCH_SCALE_"))
        with open("/proc/meminfo") as handle:
            mem = int(handle.readline().split()[1]) / 1024.0 / 1024.0
        return {
            "command": (knobs + " make bench-scale").strip(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "source": "%s (%s%s)" % (self.cfg.ref or "working tree", rev, dirty),
            "baseline": "%s (%s)" % (self.cfg.baseline, baseline) if self.cfg.baseline else None,
            "machine": "%s CPU(s), %.0f GiB, %s, kernel %s" % (
                os.cpu_count(), mem, out(["sh", "-c", ". /etc/os-release; echo $PRETTY_NAME"]), os.uname().release),
            "ansible": out([os.path.join(VENV_BIN, "ansible"), "--version"]).splitlines()[0],
            "python": sys.version.split()[0],
            "wall_s": time.time() - started,
        }

    def cleanup(self):
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)


# --- the tables --------------------------------------------------------------------------------


def per_node(row, what, key):
    return row[what + "_median"][key] / row["n"]


def marginal(rows, index, what, key):
    """CPU seconds per node added, from the previous size to this one."""
    if index == 0:
        return None
    a, b = rows[index - 1], rows[index]
    return (b[what + "_median"][key] - a[what + "_median"][key]) / float(b["n"] - a["n"])


def pair(a, b, fmt=fmt_s):
    return "%s / %s" % (fmt(a), fmt(b))


def fmt_ms(value):
    return "-" if value is None else "%.0f" % (value * 1000)


def fmt_mib(value):
    return "-" if value is None else "%.0f" % value


def flatness(rows, what, label):
    """The controller CPU per node at the largest size against the smallest, and the marginal cost."""
    first, last = rows[0], rows[-1]
    flat = per_node(last, what, "controller_cpu_s") / per_node(first, what, "controller_cpu_s")
    line = "Controller CPU per node of %s at %d nodes: %.2fx the figure at %d nodes" % (label, last["n"], flat, first["n"])
    if len(rows) >= 3:
        m_first = marginal(rows, 1, what, "controller_cpu_s")
        m_last = marginal(rows, len(rows) - 1, what, "controller_cpu_s")
        line += ("; the marginal cost of a node from %d to %d nodes: %.2fx that from %d to %d nodes (%.0f / %.0f ms)"
                 % (rows[-2]["n"], last["n"], m_last / m_first, first["n"], rows[1]["n"], m_last * 1000,
                    m_first * 1000))
    return line


def marginal_kib(rows, index, what):
    """The controller's peak RSS added per node, from the previous size to this one, in KiB."""
    if index == 0:
        return None
    a, b = rows[index - 1], rows[index]
    return (b[what + "_median"]["peak_rss_mib"] - a[what + "_median"]["peak_rss_mib"]) * 1024.0 / (b["n"] - a["n"])


def _spread(values, fmt):
    """``median (min-max)`` of one figure over the runs."""
    values = sorted(v for v in values if v is not None)
    if not values:
        return "-"
    if len(values) == 1:
        return fmt(values[0])
    return "%s (%s-%s)" % (fmt(median(values)), fmt(values[0]), fmt(values[-1]))


def targets_table(rows, h, markdown):
    """Issue 30's four targets, each figure taken run by run (run i of each playbook, the same
    interleaved round), then its median, min and max over the runs."""
    out = ["", h("Issue 30's targets, run by run: median (min-max) over the runs"), ""]
    runs = min(len(r[w]) for r in rows for w in ("site", "floor", "hand"))
    table_rows = []
    for i, r in enumerate(rows):
        wall = [s["wall_s"] / f["wall_s"] for s, f in zip(r["site"], r["floor"])]
        cpu = [s["controller_cpu_s"] / h_["controller_cpu_s"] for s, h_ in zip(r["site"], r["hand"])]
        rss = [None]
        if i:
            step = (r["n"] - rows[i - 1]["n"]) / 1024.0
            rss = [(s["peak_rss_mib"] - p["peak_rss_mib"]) / step for s, p in zip(r["site"], rows[i - 1]["site"])]
        table_rows.append([r["n"], _spread(wall, fmt_ratio), _spread(cpu, fmt_ratio), _spread(rss, fmt_mib)])
    out.append(table(["nodes", "site/floor wall (target <= 1.2x)", "site/hand controller CPU (target <= 1.2x)",
                      "marginal controller peak RSS KiB/node (target <= 50)"], table_rows, markdown))
    if len(rows) >= 4:
        def slope(what, a, b, k):
            return ((rows[b][what][k]["controller_cpu_s"] - rows[a][what][k]["controller_cpu_s"])
                    / float(rows[b]["n"] - rows[a]["n"]))
        last = len(rows) - 1
        ratios = [slope("site", last - 1, last, k) / slope("site", 0, 1, k) for k in range(runs)]
        out.append("")
        sizes = (rows[last - 1]["n"], rows[last]["n"], rows[0]["n"], rows[1]["n"])
        out.append("Marginal controller CPU per node of site.yml from %d to %d nodes over that from %d to %d nodes "
                   "(target <= 1.1x): %s, over %d run(s)." % (sizes + (_spread(ratios, fmt_ratio), runs)))
    return out


def hand_table(rows, h, markdown):
    """site.yml next to bench/scale-hand.yml, the same reads and node checks written by hand."""
    out = ["", h("site.yml / the hand-written playbook (bench/scale-hand.yml), in the same runs"), ""]
    table_rows = []
    for i, r in enumerate(rows):
        site_cpu, hand_cpu = per_node(r, "site", "controller_cpu_s"), per_node(r, "hand", "controller_cpu_s")
        site_m, hand_m = marginal(rows, i, "site", "controller_cpu_s"), marginal(rows, i, "hand", "controller_cpu_s")
        table_rows.append([
            r["n"], pair(r["site_median"]["wall_s"], r["hand_median"]["wall_s"]),
            pair(site_cpu * 1000, hand_cpu * 1000, lambda v: "%.0f" % v), fmt_ratio(site_cpu / hand_cpu),
            pair(site_m, hand_m, fmt_ms), "-" if site_m is None or not hand_m else fmt_ratio(site_m / hand_m),
            pair(per_node(r, "site", "module_cpu_s") * 1000, per_node(r, "hand", "module_cpu_s") * 1000, lambda v: "%.0f" % v),
            pair(marginal_kib(rows, i, "site"), marginal_kib(rows, i, "hand"), fmt_mib),
            "%.2f / %.2f" % (r["site"][-1]["counts"]["tasks"] + r["site"][-1]["counts"]["skipped"],
                             r["hand"][-1]["counts"]["tasks"] + r["hand"][-1]["counts"]["skipped"]),
        ])
    out.append(table(["nodes", "wall s", "controller CPU ms/node", "ratio", "marginal controller CPU ms/node", "ratio",
                      "module CPU ms/node", "marginal peak RSS KiB/node", "tasks run or skipped/node"], table_rows, markdown))
    return out


def render(results, markdown=False):
    meta, cfg, rows = results["meta"], results["config"], results["sizes"]
    h = (lambda text: "## " + text) if markdown else (lambda text: "\n" + text + "\n" + "=" * len(text))
    bullet = "- " if markdown else ""
    title = "gpufleet.nvidia scale bench: site.yml over a simulated fleet"
    out = [("# " + title) if markdown else title, ""]
    baseline = ", next to the baseline %s" % meta["baseline"] if meta.get("baseline") else ""
    out.append("%s%s: `%s`, measuring %s%s" % (bullet, meta["date"], meta["command"], meta["source"], baseline))
    out.append("%s%s; %s; Python %s" % (bullet, meta["machine"], meta["ansible"], meta["python"]))
    out.append("%sforks %d, medians of %d run(s), local connection with pipelining; bench wall time %.0fs"
               % (bullet, cfg["forks"], cfg["runs"], meta["wall_s"]))
    out.append("%ssite.yml %s, gpu_operator in render mode (planned, not applied), validate_cluster false, "
               "preflight on; floor: bench/scale-floor.yml (one ping per host, no facts)" % (bullet, " ".join(SKIP)))
    out.append("")
    out.append(h("Wall time and CPU, site.yml / floor"))
    out.append("")
    table_rows = []
    for i, r in enumerate(rows):
        s, f = r["site_median"], r["floor_median"]
        table_rows.append([
            r["n"], fmt_s(s["wall_s"]), fmt_s(f["wall_s"]), fmt_ratio(s["wall_s"] / f["wall_s"]),
            pair(per_node(r, "site", "controller_cpu_s") * 1000, per_node(r, "floor", "controller_cpu_s") * 1000,
                 lambda v: "%.0f" % v),
            pair(marginal(rows, i, "site", "controller_cpu_s"), marginal(rows, i, "floor", "controller_cpu_s"), fmt_ms),
            pair(per_node(r, "site", "module_cpu_s") * 1000, per_node(r, "floor", "module_cpu_s") * 1000,
                 lambda v: "%.0f" % v),
            pair(s["peak_rss_mib"], f["peak_rss_mib"], fmt_mib),
            pair(s["peak_tree_pss_mib"], f["peak_tree_pss_mib"], fmt_mib),
        ])
    out.append(table(["nodes", "site.yml s", "floor s", "site/floor", "controller CPU ms/node",
                      "marginal controller CPU ms/node", "module CPU ms/node", "controller peak RSS MiB",
                      "tree peak PSS MiB"], table_rows, markdown))
    out.append("")
    out.append(flatness(rows, "site", "site.yml") + ".")
    out += hand_table(rows, h, markdown)
    out += targets_table(rows, h, markdown)
    if "baseline" in rows[0]:
        out.append("")
        out.append(h("Before and after: the baseline %s / the measured tree, in the same runs" % meta["baseline"]))
        out.append("")
        table_rows = []
        for i, r in enumerate(rows):
            b, s = r["baseline_median"], r["site_median"]
            table_rows.append([
                r["n"], pair(b["wall_s"], s["wall_s"]),
                pair(per_node(r, "baseline", "controller_cpu_s") * 1000, per_node(r, "site", "controller_cpu_s") * 1000,
                     lambda v: "%.0f" % v),
                pair(marginal(rows, i, "baseline", "controller_cpu_s"), marginal(rows, i, "site", "controller_cpu_s"),
                     fmt_ms),
                pair(per_node(r, "baseline", "module_cpu_s") * 1000, per_node(r, "site", "module_cpu_s") * 1000,
                     lambda v: "%.0f" % v),
                pair(b["peak_rss_mib"], s["peak_rss_mib"], fmt_mib),
                "%.2f / %.2f" % (r["baseline"][-1]["counts"]["tasks"], r["site"][-1]["counts"]["tasks"]),
            ])
        out.append(table(["nodes", "site.yml s", "controller CPU ms/node", "marginal controller CPU ms/node",
                          "module CPU ms/node", "controller peak RSS MiB", "tasks/node"], table_rows, markdown))
        out.append("")
        out.append(flatness(rows, "baseline", "the baseline") + ".")
    out.append("")
    out.append(h("What each node costs, site.yml / floor"))
    out.append("")
    table_rows = []
    for r in rows:
        sc, fc = r["site"][-1]["counts"], r["floor"][-1]["counts"]
        fleet = r["site"][-1].get("fleet", {})
        summary = fleet.get("summary") or {}
        table_rows.append([
            r["n"], "%.2f / %g" % (sc["tasks"], fc["tasks"]), "%.2f" % sc["skipped"],
            "%g / %g" % (sc["modules"], fc["modules"]),
            "%.2f / %.2f" % (r["site_median"]["module_processes"] / r["n"],
                             r["floor_median"]["module_processes"] / r["n"]),
            "%s, %s" % (fleet.get("status"), ", ".join("%s %s" % (summary.get(k), k.replace("_", " "))
                                                       for k in ("ok", "drifted", "failed", "no_gpu", "not_validated")
                                                       if summary.get(k))),
            fleet.get("labelled_nodes"),
        ])
    out.append(table(["nodes", "tasks/node", "skipped/node", "modules/node (callback)", "module processes/node",
                      "site.yml report", "nodes labelled by the plan"], table_rows, markdown))
    out.append("")
    out.append("controller CPU = the ansible-playbook process tree (its workers included) minus the module processes; "
               "module CPU = the module processes, as the nodes' interpreter measures them (on a real fleet: the "
               "nodes' CPU); marginal = the slope from the previous size, free of the run's fixed cost; tasks = task "
               "results ok/changed/failed per node, the run-once tasks counted on the first node; the modules that write "
               "the rendered plan on the control host (once per run, localhost's own interpreter) count as "
               "controller CPU.")
    biggest = rows[-1]["site"][-1]["counts"]
    out.append("")
    out.append("Where site.yml on %d nodes spent its %.1fs (last run): %.1fs in %d tasks; the slowest tasks, from "
               "their start to the next task's:"
               % (rows[-1]["n"], rows[-1]["site"][-1]["wall_s"], biggest.get("tasks_total_s") or 0, biggest.get("task_count") or 0))
    out.append("")
    out.append(table(["task", "action", "s"], [[short(t["task"]), t["action"], "%.2f" % t["seconds"]]
                                               for t in biggest.get("top_tasks", [])[:8]], markdown))
    if results.get("notes"):
        out.append("")
        out.append(h("Notes"))
        out.append("")
        out += ["- " + n for n in results["notes"]]
    return "\n".join(out) + "\n"


def main():
    try:
        cfg = Config()
    except BenchError as exc:
        sys.stderr.write("ERROR: %s\n" % exc)
        return 2
    scale = Scale(cfg)
    try:
        results = scale.bench()
    except BenchError as exc:
        sys.stderr.write("ERROR: %s\n" % exc)
        return 1
    finally:
        scale.cleanup()
    sys.stdout.write(render(results))
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for path in (os.path.join(RESULTS, cfg.name + ".json"), os.path.join(RESULTS, "%s-%s.json" % (cfg.name, stamp))):
        with open(path, "w") as handle:
            json.dump(results, handle, indent=1, sort_keys=True)
    with open(os.path.join(RESULTS, cfg.name + ".md"), "w") as handle:
        handle.write(render(results, markdown=True))
    log("written: bench/results/%s.md, bench/results/%s.json (and %s-%s.json)" % (cfg.name, cfg.name, cfg.name, stamp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
