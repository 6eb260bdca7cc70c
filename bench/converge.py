"""The cost of a converge at fleet scale: site.yml against its floor, on lab nodes (`make bench`).

Run by bench/run.sh as root, with the virtual environment's Python. Measures, in one run:

1. no-op site.yml (nothing to change) on BENCH_SIZES converged nodes, next to the floor of any
   play (facts and one module per host, bench/floor.yml), per transport: wall time, wall time per
   node, tasks executed and module invocations per node (bench/callback_plugins/bench_count.py);
   the whole of site.yml, and its host layers alone (``--tags driver,toolkit``: discovery and
   preflight, the driver, the toolkit and the runtime, then the report; no validation, no cluster);
2. the first converge of a fresh node: site.yml next to bench/floor-converge.sh, the same package
   installs and file writes done directly by a shell script in an identical fresh node;
3. gpu_facts alone: in a node (in-process probes, and the module's AnsiballZ file run as a
   process, through `podman exec`) and through `ansible -m gpufleet.nvidia.gpu_facts`.

Figures are medians of BENCH_RUNS runs; ratios are printed since the machine is shared and noisy.
The table goes to stdout and to bench/results/latest.md and latest.json. Environment knobs:

    BENCH_RUNS=3             runs per figure (median)
    BENCH_SIZES="1 4 8"      fleet sizes of the no-op measurement
    BENCH_TRANSPORTS="ssh podman"
                             ssh: OpenSSH with pipelining and ControlPersist (production);
                             podman: the lab's containers.podman.podman (cannot pipeline)
    BENCH_PODMAN_SIZES="1 4" the sizes also measured through podman: a module costs about twice
                             as much through it as through ssh, and 8 nodes through podman
                             would take the bench past 25 minutes on a 2-core machine
    BENCH_FIRST_RUNS=1       runs of the first-converge measurement (a fresh node each); 0: none
    BENCH_FIRST_OS=debian12  the OSes of the first-converge measurement (debian12 and/or debian13)
    BENCH_FORKS=10           Ansible forks (>= the largest size: every node in one batch)
    BENCH_REF=""             a git ref to measure (its tree, exported with git archive) instead
                             of the working tree, e.g. BENCH_REF=HEAD
    BENCH_KEEP=0             1: keep the bench's nodes and images at the end (debugging)
"""

from __future__ import annotations

import datetime
import json
import os
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
CACHE = os.path.join(ROOT, ".cache", "bench")
RESULTS = os.path.join(BENCH, "results")
VENV_BIN = os.path.join(ROOT, ".venv", "bin")
LABEL = "gpufleet-bench=1"
PREFIX = "gpufleet-bench-"
NODE_IMAGE = os.environ.get("GPUFLEET_IMAGE_REPO", "localhost/gpufleet-node")
CONVERGED_IMAGE = "localhost/gpufleet-bench-converged"
SSH_KEY = os.path.join(CACHE, "ssh", "id_ed25519")
APT_ARCHIVES = os.path.join(CACHE, "apt-archives")
NODE_ARCHIVES = os.path.join(CACHE, "apt-archives-nodes")
STANDIN_KEY_URL = "http://127.0.0.1:8088/gpgkey"
SSH_COMMON_ARGS = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
# The files site.yml writes on a lab node's first converge (their final content is what the
# floor script writes): the Debian sources with the driver's components, the driver's pin, its
# unattended-upgrades blacklist and the nouveau blacklist (nvidia_driver), the toolkit's source
# and pin (container_toolkit), containerd's main config with its imports line and the nvidia
# drop-in (container_runtime). The toolkit's key is downloaded by both.
WRITTEN_FILES = (
    "etc/apt/sources.list",
    "etc/apt/sources.list.d/debian.sources",
    "etc/apt/preferences.d/gpufleet-nvidia-driver.pref",
    "etc/apt/apt.conf.d/51gpufleet-nvidia-driver",
    "etc/modprobe.d/gpufleet-nvidia-blacklist-nouveau.conf",
    "etc/apt/sources.list.d/nvidia-container-toolkit.list",
    "etc/apt/preferences.d/nvidia-container-toolkit.pref",
    "etc/containerd/config.toml",
    "etc/containerd/conf.d/99-nvidia.toml",
)
# What the roles install besides the held packages: the container_runtime module's dependency.
EXTRA_PACKAGES = ("python3-tomlkit",)


def log(msg: str) -> None:
    sys.stderr.write("\033[1m==> %s\033[0m\n" % msg)
    sys.stderr.flush()


class BenchError(Exception):
    pass


def sh(argv, check=True, capture=True, input_text=None, env=None, timeout=None):
    proc = subprocess.run(argv, capture_output=capture, text=True, input=input_text, env=env, timeout=timeout,
                          check=False)
    if check and proc.returncode != 0:
        output = ((proc.stdout or "") + (proc.stderr or ""))[-3000:]
        raise BenchError("%s failed (exit %d): %s" % (" ".join(argv), proc.returncode, output))
    return proc


def median(values):
    return statistics.median(values) if values else None


# What the no-op measurement runs: the floor, site.yml, and site.yml's host layers alone.
MEASURED = ("floor", "site", "layers")
LAYERS_ONLY = ("--tags", "driver,toolkit")


def cpu_median(samples, nodes):
    """Medians of the CPU seconds of several runs, per node."""
    out = {}
    for key in ("controller_s", "nodes_s"):
        values = [s[key] for s in samples if s and s.get(key) is not None]
        out[key.replace("_s", "_per_node_s")] = statistics.median(values) / nodes if values else None
    return out


def env_list(name, default):
    return os.environ.get(name, default).split()


class Config(object):
    def __init__(self):
        self.runs = int(os.environ.get("BENCH_RUNS", "3"))
        self.sizes = [int(s) for s in env_list("BENCH_SIZES", "1 4 8")]
        self.transports = env_list("BENCH_TRANSPORTS", "ssh podman")
        self.podman_sizes = [int(s) for s in env_list("BENCH_PODMAN_SIZES", "1 4")]
        self.first_runs = int(os.environ.get("BENCH_FIRST_RUNS", "1"))
        self.first_os = env_list("BENCH_FIRST_OS", "debian12")
        self.forks = int(os.environ.get("BENCH_FORKS", "10"))
        self.ref = os.environ.get("BENCH_REF", "")
        self.keep = os.environ.get("BENCH_KEEP", "0") == "1"
        for transport in self.transports:
            if transport not in ("ssh", "podman"):
                raise BenchError("BENCH_TRANSPORTS: unknown transport %r (ssh, podman)" % transport)
        for os_name in self.first_os:
            if os_name not in ("debian12", "debian13"):
                raise BenchError("BENCH_FIRST_OS: unknown OS %r (debian12, debian13)" % os_name)
        if self.runs < 1 or not self.sizes:
            raise BenchError("BENCH_RUNS must be 1 or more and BENCH_SIZES not empty")

    def sizes_for(self, transport):
        if transport == "podman":
            return [n for n in self.sizes if n in self.podman_sizes]
        return list(self.sizes)

    def as_dict(self):
        return {
            "runs": self.runs,
            "sizes": self.sizes,
            "transports": self.transports,
            "podman_sizes": self.podman_sizes,
            "first_runs": self.first_runs,
            "first_os": self.first_os,
            "forks": self.forks,
            "ref": self.ref or "working tree",
        }


class Bench(object):
    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.nodes = []  # containers this run started
        self.images = []  # images this run committed
        self.notes = []
        self.results = {"noop": [], "first": [], "gpu_facts": {}, "reference": []}
        self.logs = os.path.join(CACHE, "logs")
        self.inv_dir = os.path.join(CACHE, "inventories")
        self.src = ROOT
        self.collections = os.path.join(ROOT, ".cache", "collections")
        self.bundles = {}
        self.log_seq = 0
        self.cgroups = {}
        self.last_cpu = {}

    # --- nodes ----------------------------------------------------------------------------------

    def start_node(self, name, image, apt_cache=False):
        sh(["podman", "rm", "-f", name], check=False)
        argv = ["podman", "run", "-d", "--name", name, "--hostname", name, "--systemd=always", "--privileged",
                "--tmpfs", "/var/lib/containerd:rw,exec", "--label", LABEL]
        if apt_cache:
            # One archive cache for every first converge, so that downloads do not dominate and
            # site.yml and the floor pay the same: each node gets its own directory (apt locks
            # the directory, and nodes run apt at the same time) holding hard links to every
            # package the cache has; what a node downloads goes back to the cache when it goes.
            own = os.path.join(NODE_ARCHIVES, name)
            shutil.rmtree(own, ignore_errors=True)
            os.makedirs(os.path.join(own, "partial"))
            for deb in os.listdir(APT_ARCHIVES):
                if deb.endswith(".deb"):
                    os.link(os.path.join(APT_ARCHIVES, deb), os.path.join(own, deb))
            argv += ["-v", "%s:/var/cache/apt/archives" % own]
        sh(argv + [image, "/sbin/init"])
        self.nodes.append(name)

    def remove_nodes(self, names):
        names = [n for n in names if n in self.nodes]
        if names:
            sh(["podman", "rm", "-f", "-t", "0"] + names, check=False)
            self.nodes = [n for n in self.nodes if n not in names]
        for name in names:
            own = os.path.join(NODE_ARCHIVES, name)
            if not os.path.isdir(own):
                continue
            for deb in os.listdir(own):
                target = os.path.join(APT_ARCHIVES, deb)
                if deb.endswith(".deb") and not os.path.exists(target):
                    os.link(os.path.join(own, deb), target)
            shutil.rmtree(own, ignore_errors=True)

    def ip(self, name):
        return sh(["podman", "inspect", "-f", "{{.NetworkSettings.IPAddress}}", name]).stdout.strip()

    def node_cpu(self, names):
        """CPU seconds the nodes' containers used so far (their cgroups: systemd, sshd, the modules)."""
        total = 0.0
        for name in names:
            if name not in self.cgroups:
                path = sh(["podman", "inspect", "-f", "{{.State.CgroupPath}}", name]).stdout.strip()
                self.cgroups[name] = None
                for candidate, kind in (("/sys/fs/cgroup/cpuacct%s/cpuacct.usage" % path, "ns"),
                                        ("/sys/fs/cgroup%s/cpu.stat" % path, "stat"),
                                        ("/sys/fs/cgroup/unified%s/cpu.stat" % path, "stat")):
                    if path and os.path.exists(candidate):
                        self.cgroups[name] = (candidate, kind)
                        break
            if self.cgroups[name] is None:
                return None
            candidate, kind = self.cgroups[name]
            with open(candidate) as handle:
                text = handle.read()
            if kind == "ns":
                total += int(text.strip()) / 1e9
            else:
                usage = [line.split()[1] for line in text.splitlines() if line.startswith("usage_usec ")]
                total += int(usage[0]) / 1e6
        return total

    @staticmethod
    def controller_cpu():
        """CPU seconds this process's finished children used so far (ansible and what it runs)."""
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    def cpu_begin(self, nodes):
        return (self.controller_cpu(), self.node_cpu(nodes) if nodes else None)

    def cpu_end(self, nodes, begin):
        nodes_now = self.node_cpu(nodes) if nodes else None
        self.last_cpu = {
            "controller_s": self.controller_cpu() - begin[0],
            "nodes_s": nodes_now - begin[1] if nodes_now is not None and begin[1] is not None else None,
        }
        return self.last_cpu

    def install_key(self, names):
        with open(SSH_KEY + ".pub") as handle:
            pub = handle.read()
        for name in names:
            sh(["podman", "exec", "-i", name, "sh", "-c",
                "mkdir -p -m 700 /root/.ssh && cat > /root/.ssh/authorized_keys && chmod 600 /root/.ssh/authorized_keys"],
               input_text=pub)

    def has_sshd(self, image):
        proc = sh(["podman", "run", "--rm", image, "test", "-x", "/usr/sbin/sshd"], check=False)
        return proc.returncode == 0

    # --- inventories and Ansible ------------------------------------------------------------------

    def inventory(self, label, nodes, transport):
        path = os.path.join(self.inv_dir, label)
        os.makedirs(path, exist_ok=True)
        groups = {"debian12": [], "debian13": []}
        for name in nodes:
            groups[name[-8:]].append(name)
        lines = ["---", "# Written by bench/converge.py: %d lab node(s), transport %s." % (len(nodes), transport),
                 "all:", "  children:", "    lab:", "      children:"]
        for group, members in groups.items():
            if not members:
                continue
            lines += ["        lab_%s:" % group, "          hosts:"]
            for name in members:
                lines.append("            %s:" % name)
                if transport == "ssh":
                    lines += [
                        "              ansible_connection: ssh",
                        "              ansible_host: %s" % self.ip(name),
                        "              ansible_user: root",
                        "              ansible_ssh_private_key_file: %s" % SSH_KEY,
                        "              ansible_ssh_common_args: %s" % SSH_COMMON_ARGS,
                    ]
        with open(os.path.join(path, "hosts.yml"), "w") as handle:
            handle.write("\n".join(lines) + "\n")
        link = os.path.join(path, "group_vars")
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(os.path.join(self.src, "inventory", "lab", "group_vars"), link)
        return path

    def ansible_env(self, transport, count_file=None, extra=None):
        env = dict(os.environ)
        env.pop("ANSIBLE_CONFIG", None)
        env.update({
            "PATH": VENV_BIN + os.pathsep + env.get("PATH", ""),
            "ANSIBLE_COLLECTIONS_PATH": self.collections,
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORKS": str(self.cfg.forks),
            "ANSIBLE_RETRY_FILES_ENABLED": "0",
            "ANSIBLE_HOST_KEY_CHECKING": "0",
            "ANSIBLE_CALLBACK_PLUGINS": os.path.join(BENCH, "callback_plugins"),
            "ANSIBLE_CALLBACKS_ENABLED": "bench_count",
        })
        if count_file:
            env["BENCH_COUNT_FILE"] = count_file
        if transport == "ssh":
            env["ANSIBLE_PIPELINING"] = "1"
            env["ANSIBLE_SSH_ARGS"] = "-C -o ControlMaster=auto -o ControlPersist=60s"
        env.update(extra or {})
        return env

    def ansible(self, what, argv, transport, tag, count=True, extra_env=None, check=True, nodes=()):
        """Run an ansible / ansible-playbook command; returns (wall seconds, counts, log path).

        Its CPU time lands in self.last_cpu: the controller's (ansible-playbook, its workers, the
        ssh or podman clients) and that of ``nodes`` (their containers).
        """
        self.log_seq += 1
        logfile = os.path.join(self.logs, "%03d-%s.log" % (self.log_seq, tag))
        count_file = logfile[:-4] + ".counts.json" if count else None
        extra = dict(extra_env or {})
        cp_dir = None
        if transport == "ssh":
            # A fresh ControlPath directory per run: each run opens its own master connection to
            # each host once (as a production run does) and reuses it for every task.
            cp_dir = tempfile.mkdtemp(prefix="cp-", dir=os.path.join(CACHE, "cp"))
            extra["ANSIBLE_SSH_CONTROL_PATH_DIR"] = cp_dir
        env = self.ansible_env(transport, count_file, extra)
        with open(logfile, "w") as out:
            out.write("$ %s\n" % " ".join(argv))
            out.flush()
            begin = self.cpu_begin(nodes)
            start = time.perf_counter()
            proc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT, check=False)
            wall = time.perf_counter() - start
            self.cpu_end(nodes, begin)
        if cp_dir:
            for sock in os.listdir(cp_dir):
                sh(["ssh", "-o", "ControlPath=%s" % os.path.join(cp_dir, sock), "-O", "exit", "bench"], check=False)
            shutil.rmtree(cp_dir, ignore_errors=True)
        if proc.returncode != 0 and check:
            with open(logfile) as handle:
                tail = handle.read()[-4000:]
            raise BenchError("%s failed (exit %d), log %s:\n%s" % (what, proc.returncode, logfile, tail))
        counts = None
        if count_file and os.path.exists(count_file):
            with open(count_file) as handle:
                counts = json.load(handle)
        return wall, counts, logfile

    def playbook(self, what, inventory, playbook, transport, tag, nodes=(), extra=()):
        argv = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", inventory, playbook,
                "-e", "report_dir=%s" % os.path.join(CACHE, "report")] + list(extra)
        return self.ansible(what, argv, transport, tag, nodes=nodes)

    def site(self, inventory, transport, tag, nodes=(), extra=()):
        return self.playbook("site.yml", inventory, os.path.join(self.src, "playbooks", "site.yml"), transport, tag,
                             nodes, extra)

    def floor(self, inventory, transport, tag, nodes=()):
        return self.playbook("the floor playbook", inventory, os.path.join(BENCH, "floor.yml"), transport, tag, nodes)

    def prepare(self, inventory, tag):
        self.log_seq += 1
        logfile = os.path.join(self.logs, "%03d-prepare-%s.log" % (self.log_seq, tag))
        env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_FORKS=str(self.cfg.forks), ANSIBLE_NOCOLOR="1")
        env.pop("ANSIBLE_CONFIG", None)
        start = time.perf_counter()
        with open(logfile, "w") as out:
            proc = subprocess.run([os.path.join(ROOT, "scripts", "lab.sh"), "prepare", inventory], stdout=out,
                                  stderr=subprocess.STDOUT, env=env, cwd=ROOT, check=False)
        if proc.returncode != 0:
            with open(logfile) as handle:
                raise BenchError("scripts/lab.sh prepare failed, log %s:\n%s" % (logfile, handle.read()[-4000:]))
        return time.perf_counter() - start

    # --- setup -----------------------------------------------------------------------------------

    def setup(self):
        for path in (self.logs, self.inv_dir, os.path.join(CACHE, "cp"), os.path.join(CACHE, "ssh"),
                     APT_ARCHIVES, NODE_ARCHIVES, RESULTS):
            os.makedirs(path, exist_ok=True)
        for name in os.listdir(self.logs):
            os.unlink(os.path.join(self.logs, name))
        stale = sh(["podman", "ps", "-a", "--filter", "label=" + LABEL, "--format", "{{.Names}}"]).stdout.split()
        if stale:
            log("removing bench nodes left by an earlier run: %s" % " ".join(stale))
            sh(["podman", "rm", "-f", "-t", "0"] + stale, check=False)
        if not os.path.exists(SSH_KEY):
            sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpufleet-bench", "-f", SSH_KEY])
        if "ssh" in self.cfg.transports:
            missing = [tag for tag in ("debian12", "debian13") if not self.has_sshd("%s:%s" % (NODE_IMAGE, tag))]
            if missing:
                self.cfg.transports = [t for t in self.cfg.transports if t != "ssh"]
                self.note("SSH not measured: the node images (%s) have no openssh-server; rebuild them with "
                          "FORCE=1 scripts/build-images.sh" % ", ".join(missing))
        if not self.cfg.transports:
            raise BenchError("no transport left to measure")
        if self.cfg.ref:
            self.src = os.path.join(CACHE, "src")
            shutil.rmtree(self.src, ignore_errors=True)
            os.makedirs(self.src)
            archive = subprocess.Popen(["git", "-C", ROOT, "archive", self.cfg.ref], stdout=subprocess.PIPE)
            subprocess.run(["tar", "-x", "-C", self.src], stdin=archive.stdout, check=True)
            if archive.wait() != 0:
                raise BenchError("git archive %s failed" % self.cfg.ref)
            self.collections = os.path.join(CACHE, "collections")
            link = os.path.join(self.collections, "ansible_collections", "gpufleet", "nvidia")
            os.makedirs(os.path.dirname(link), exist_ok=True)
            if os.path.lexists(link):
                os.unlink(link)
            os.symlink(self.src, link)
        else:
            link = os.path.join(self.collections, "ansible_collections", "gpufleet", "nvidia")
            if not os.path.islink(link):
                os.makedirs(os.path.dirname(link), exist_ok=True)
                os.symlink(ROOT, link)

    def note(self, text):
        self.notes.append(text)
        log("note: " + text)

    # --- 1. reference nodes: converged once, committed, and the floor's bundle ---------------------

    def reference(self):
        """Converge one fresh node per OS, keep what site.yml wrote (the floor's bundle), commit it."""
        oses = ["debian12", "debian13"]
        names = ["%sref-%s" % (PREFIX, o) for o in oses]
        cold = not any(f.endswith(".deb") for f in os.listdir(APT_ARCHIVES))
        log("reference nodes: fresh %s, prepared, converged by site.yml, committed as %s:<os>"
            % (" ".join(names), CONVERGED_IMAGE))
        for name, os_name in zip(names, oses):
            self.start_node(name, "%s:%s" % (NODE_IMAGE, os_name), apt_cache=True)
        self.install_key(names)
        transport = "ssh" if "ssh" in self.cfg.transports else "podman"
        inv_podman = self.inventory("reference-podman", names, "podman")
        self.prepare(inv_podman, "reference")
        inv = self.inventory("reference-%s" % transport, names, transport)
        wall, counts, dummy = self.site(inv, transport, "reference-site")
        self.results["reference"].append({
            "nodes": names, "transport": transport, "wall_s": wall,
            "apt_cache": "cold (downloads included)" if cold else "warm", "counts": counts})
        for name, os_name in zip(names, oses):
            self.bundles[os_name] = self.capture_bundle(name, os_name)
            image = "%s:%s" % (CONVERGED_IMAGE, os_name)
            sh(["podman", "commit", "-q", name, image])
            self.images.append(image)
        self.remove_nodes(names)

    def capture_bundle(self, name, os_name):
        """The floor's input: what site.yml wrote and installed on the reference node."""
        bundle = os.path.join(CACHE, "floor", os_name)
        shutil.rmtree(bundle, ignore_errors=True)
        os.makedirs(bundle)
        present = sh(["podman", "exec", name, "sh", "-c",
                      "cd / && for f in %s; do [ -f \"$f\" ] && echo \"$f\"; done; true" % " ".join(WRITTEN_FILES)]
                     ).stdout.split()
        with open(os.path.join(bundle, "files.tar"), "wb") as handle:
            proc = subprocess.run(["podman", "exec", name, "tar", "-c", "-f", "-", "-C", "/"] + present,
                                  stdout=handle, check=False)
        if proc.returncode != 0:
            raise BenchError("could not read the files site.yml wrote on %s" % name)
        holds = sh(["podman", "exec", name, "apt-mark", "showhold"]).stdout.split()
        if not holds:
            raise BenchError("site.yml held no package on %s: nothing for the floor to mirror" % name)
        fmt = "${Package}=${Version}\\n"
        packages = sh(["podman", "exec", name, "dpkg-query", "-W", "-f", fmt] + holds + list(EXTRA_PACKAGES)
                      ).stdout.split()
        with open(os.path.join(bundle, "holds"), "w") as handle:
            handle.write("\n".join(holds) + "\n")
        with open(os.path.join(bundle, "packages"), "w") as handle:
            handle.write("\n".join(packages) + "\n")
        with open(os.path.join(bundle, "key_url"), "w") as handle:
            handle.write(STANDIN_KEY_URL + "\n")
        shutil.copy(os.path.join(BENCH, "floor-converge.sh"), os.path.join(bundle, "floor-converge.sh"))
        return {"dir": bundle, "files": present, "packages": packages, "state": self.state(name, present)}

    @staticmethod
    def state(name, files):
        """What a converged node holds: its held packages at their versions and the written files' sums."""
        out = sh(["podman", "exec", name, "sh", "-c",
                  "dpkg-query -W -f '${Package}=${Version}\\n' $(apt-mark showhold) | sort; "
                  "cd / && md5sum %s" % " ".join(files)]).stdout
        return out

    # --- 2. first converge -------------------------------------------------------------------------

    def first_converge(self):
        rows = []
        if self.cfg.first_runs < 1:  # BENCH_FIRST_RUNS=0: no first-converge measurement
            self.results["first"] = rows
            return
        for os_name in self.cfg.first_os:
            for transport in self.cfg.transports:
                rows.append({"os": os_name, "transport": transport, "site_s": [], "floor_s": [], "same_state": [],
                             "site_cpu": [], "floor_cpu": []})
        for run in range(self.cfg.first_runs if rows else 0):
            names = {}
            for os_name in self.cfg.first_os:
                names[(os_name, "floor")] = "%sfirst%d-floor-%s" % (PREFIX, run + 1, os_name)
                for transport in self.cfg.transports:
                    names[(os_name, transport)] = "%sfirst%d-%s-%s" % (PREFIX, run + 1, transport, os_name)
            log("first converge, run %d/%d: fresh nodes %s" % (run + 1, self.cfg.first_runs, " ".join(names.values())))
            for (os_name, dummy), name in names.items():
                self.start_node(name, "%s:%s" % (NODE_IMAGE, os_name), apt_cache=True)
            self.install_key(list(names.values()))
            self.prepare(self.inventory("first%d-prepare" % run, list(names.values()), "podman"), "first%d" % run)
            for os_name in self.cfg.first_os:
                bundle = self.bundles[os_name]
                order = ["floor"] + self.cfg.transports
                if run % 2:
                    order.reverse()
                for what in order:
                    name = names[(os_name, what)]
                    if what == "floor":
                        wall = self.floor_converge(name, bundle)
                        for row in rows:
                            if row["os"] == os_name:
                                row["floor_s"].append(wall)
                                row["floor_cpu"].append(self.last_cpu)
                        log("  floor-converge.sh on %s: %.1fs" % (name, wall))
                    else:
                        inv = self.inventory("first%d-%s-%s" % (run, what, os_name), [name], what)
                        wall, counts, dummy = self.site(inv, what, "first%d-site-%s-%s" % (run, what, os_name),
                                                        nodes=[name])
                        row = next(r for r in rows if r["os"] == os_name and r["transport"] == what)
                        row["site_s"].append(wall)
                        row["site_cpu"].append(self.last_cpu)
                        row["counts"] = counts
                        log("  site.yml (%s) on %s: %.1fs" % (what, name, wall))
                # The floor must reach the state site.yml reaches: same packages held at the same
                # versions, same files.
                floor_state = self.state(names[(os_name, "floor")], bundle["files"])
                for transport in self.cfg.transports:
                    same = self.state(names[(os_name, transport)], bundle["files"]) == floor_state
                    row = next(r for r in rows if r["os"] == os_name and r["transport"] == transport)
                    row["same_state"].append(same and floor_state == bundle["state"])
            self.remove_nodes(list(names.values()))
        for row in rows:
            row["site_median_s"] = median(row["site_s"])
            row["floor_median_s"] = median(row["floor_s"])
            row["ratio"] = row["site_median_s"] / row["floor_median_s"]
            row["packages"] = len(self.bundles[row["os"]]["packages"])
            for what in ("site", "floor"):
                row[what + "_cpu_median"] = cpu_median(row[what + "_cpu"], 1)
            if not all(row["same_state"]):
                self.note("first converge on %s: the floor script did NOT reach the state site.yml reached "
                          "(held packages or written files differ); see .cache/bench/floor/%s" % (row["os"], row["os"]))
        self.results["first"] = rows

    def floor_converge(self, name, bundle):
        begin = self.cpu_begin([name])
        start = time.perf_counter()
        sh(["podman", "cp", bundle["dir"], "%s:/tmp/gpufleet-bench-floor" % name])
        self.log_seq += 1
        logfile = os.path.join(self.logs, "%03d-floor-converge-%s.log" % (self.log_seq, name))
        with open(logfile, "w") as out:
            proc = subprocess.run(["podman", "exec", name, "bash", "/tmp/gpufleet-bench-floor/floor-converge.sh",
                                   "/tmp/gpufleet-bench-floor"], stdout=out, stderr=subprocess.STDOUT, check=False)
        wall = time.perf_counter() - start
        self.cpu_end([name], begin)
        if proc.returncode != 0:
            with open(logfile) as handle:
                raise BenchError("floor-converge.sh failed on %s, log %s:\n%s" % (name, logfile, handle.read()[-3000:]))
        return wall

    # --- 3. the converged fleet and the no-op runs -------------------------------------------------

    def fleet(self):
        size = max(self.cfg.sizes)
        names = []
        for index in range(size):
            os_name = ("debian12", "debian13")[index % 2]
            names.append("%s%02d-%s" % (PREFIX, index + 1, os_name))
        log("converged fleet: %d clones of %s:<os> (%s .. %s)" % (size, CONVERGED_IMAGE, names[0], names[-1]))
        for name in names:
            self.start_node(name, "%s:%s" % (CONVERGED_IMAGE, name[-8:]))
        self.install_key(names)
        # The stand-in repository's server is a transient unit that a commit does not keep.
        self.prepare(self.inventory("fleet-prepare", names, "podman"), "fleet")
        inventories = {}
        for transport in self.cfg.transports:
            for n in self.cfg.sizes_for(transport):
                inventories[(transport, n)] = self.inventory("noop-%s-%d" % (transport, n), names[:n], transport)
        warm = self.cfg.transports[0]
        log("warm-up: site.yml on the %d clones (%s)" % (size, warm))
        wall, counts, dummy = self.site(self.inventory("fleet-%s" % warm, names, warm), warm, "warmup-site")
        changed = sum(h["changed"] for host, h in (counts or {}).get("hosts", {}).items() if host != "localhost")
        if changed:
            self.note("the warm-up run after the commit changed %d task result(s): the clones were not converged"
                      % changed)
        return names, inventories

    def noop(self, names, inventories):
        rows = {}
        for (transport, n) in inventories:
            rows[(transport, n)] = {"transport": transport, "n": n}
            for what in MEASURED:
                rows[(transport, n)].update({what + "_s": [], what: None, what + "_cpu": []})
        for run in range(self.cfg.runs):
            for n in self.cfg.sizes:
                for transport in self.cfg.transports:
                    if (transport, n) not in inventories:
                        continue
                    inv = inventories[(transport, n)]
                    row = rows[(transport, n)]
                    # each run starts with the next one, so that drift of the machine hits all alike
                    order = MEASURED[run % 3:] + MEASURED[:run % 3]
                    for what in order:
                        tag = "noop-%s-%s-%d-r%d" % (what, transport, n, run + 1)
                        if what == "site":
                            wall, counts, dummy = self.site(inv, transport, tag, nodes=names[:n])
                        elif what == "layers":
                            wall, counts, dummy = self.site(inv, transport, tag, nodes=names[:n], extra=LAYERS_ONLY)
                        else:
                            wall, counts, dummy = self.floor(inv, transport, tag, nodes=names[:n])
                        row[what + "_s"].append(wall)
                        row[what + "_cpu"].append(self.last_cpu)
                        row[what] = self.per_node(counts, n)
                    log("no-op run %d/%d, %d node(s), %s: site.yml %.1fs, its host layers %.1fs, floor %.1fs"
                        % (run + 1, self.cfg.runs, n, transport, row["site_s"][-1], row["layers_s"][-1],
                           row["floor_s"][-1]))
        out = []
        for key in sorted(rows, key=lambda k: (self.cfg.transports.index(k[0]), k[1])):
            row = rows[key]
            for what in MEASURED:
                row[what + "_median_s"] = median(row[what + "_s"])
                row[what + "_cpu_median"] = cpu_median(row[what + "_cpu"], row["n"])
            row["ratio"] = row["site_median_s"] / row["floor_median_s"]
            row["layers_ratio"] = row["layers_median_s"] / row["floor_median_s"]
            for what in ("site", "layers"):
                if row[what]["changed"]:
                    self.note("no-op site.yml%s on %d node(s) (%s) changed %s task result(s) per node: not a no-op"
                              % ("" if what == "site" else " (host layers)", row["n"], row["transport"],
                                 row[what]["changed"]))
            out.append(row)
        self.results["noop"] = out

    @staticmethod
    def per_node(counts, n):
        hosts = {h: c for h, c in (counts or {}).get("hosts", {}).items() if h != "localhost"}
        local = (counts or {}).get("hosts", {}).get("localhost", {})
        keys = ("tasks", "modules", "changed", "skipped", "controller", "retries")
        total = {k: sum(c.get(k, 0) for c in hosts.values()) for k in keys}
        per = {k: round(v / float(n), 2) for k, v in total.items()}
        per["nodes_counted"] = len(hosts)
        per["localhost_tasks"] = local.get("tasks", 0)
        per["localhost_modules"] = local.get("modules", 0)
        per["actions"] = (counts or {}).get("actions", {})
        per["tasks_total_s"] = (counts or {}).get("tasks_total_s")
        per["top_tasks"] = (counts or {}).get("tasks", [])[:8]
        per["task_count"] = len((counts or {}).get("tasks", []))
        return per

    # --- 4. gpu_facts alone ------------------------------------------------------------------------

    def gpu_facts(self, names, inventories):
        out = {"in_node": {}, "ansible": []}
        # Not under /tmp: a systemd node has a tmpfs there, which the podman connection (it
        # copies files through the container's mounted root) does not see.
        keep = "/var/tmp/gpufleet-bench-keep"
        runs = max(self.cfg.runs, 5)
        for os_name in ("debian12", "debian13"):
            node = next((n for n in names if n.endswith(os_name)), None)
            if not node:
                continue
            # The module as Ansible ships it to a node: its AnsiballZ file, kept on the node.
            inv = self.inventory("gpu-facts-%s" % os_name, [node], "podman")
            sh(["podman", "exec", node, "rm", "-rf", keep])
            self.ansible("ansible -m gpu_facts (keep the AnsiballZ file)",
                         [os.path.join(VENV_BIN, "ansible"), "-i", inv, node, "-m", "gpufleet.nvidia.gpu_facts"],
                         "podman", "gpu-facts-keep-%s" % os_name, count=False,
                         extra_env={"ANSIBLE_KEEP_REMOTE_FILES": "1", "ANSIBLE_REMOTE_TMP": keep})
            ansiballz = sh(["podman", "exec", node, "sh", "-c", "ls %s/*/AnsiballZ_gpu_facts.py | head -n1" % keep]
                           ).stdout.strip()
            if not ansiballz:
                raise BenchError("no AnsiballZ_gpu_facts.py kept on %s" % node)
            workdir = os.path.dirname(ansiballz)
            sh(["podman", "exec", "-w", workdir, node, "python3", ansiballz, "explode"])
            sh(["podman", "cp", os.path.join(BENCH, "gpu_facts.py"), "%s:%s/gpu_facts.py" % (node, workdir)])
            start = time.perf_counter()
            proc = sh(["podman", "exec", node, "python3", "%s/gpu_facts.py" % workdir, "--runs", str(runs),
                       "--no-ansible", "--json", "--collections", "%s/debug_dir" % workdir, "--module", ansiballz])
            figures = json.loads(proc.stdout)
            figures["podman_exec_wall_s"] = time.perf_counter() - start
            sh(["podman", "exec", node, "rm", "-rf", keep])
            out["in_node"][os_name] = figures
        adhoc = os.path.join(VENV_BIN, "ansible")
        for transport in self.cfg.transports:
            sizes = sorted(set([1, max(self.cfg.sizes_for(transport) or [1])]))
            for n in sizes:
                inv = self.inventory("gpu-facts-%s-%d" % (transport, n), names[:n], transport)
                walls = []
                for run in range(self.cfg.runs):
                    argv = [adhoc, "-i", inv, "all", "-m", "gpufleet.nvidia.gpu_facts", "-o"]
                    wall, dummy, dummy2 = self.ansible("ansible -m gpufleet.nvidia.gpu_facts", argv, transport,
                                                       "gpu-facts-%s-%d-r%d" % (transport, n, run + 1), count=False)
                    walls.append(wall)
                out["ansible"].append({"transport": transport, "n": n, "wall_s": walls,
                                       "median_s": statistics.median(walls)})
                log("gpu_facts through ansible -m, %d node(s), %s: %.2fs" % (n, transport, statistics.median(walls)))
        self.results["gpu_facts"] = out

    # --- the whole run -----------------------------------------------------------------------------

    def run(self):
        started = time.time()
        self.setup()
        log("bench: sizes %s, %d run(s) each, transports %s, forks %d, measuring %s"
            % (" ".join(map(str, self.cfg.sizes)), self.cfg.runs, " ".join(self.cfg.transports), self.cfg.forks,
               self.cfg.ref or "the working tree"))
        phases = {}
        t0 = time.time()
        self.reference()
        phases["reference nodes (converge, commit)"] = time.time() - t0
        t0 = time.time()
        self.first_converge()
        phases["first converge"] = time.time() - t0
        t0 = time.time()
        names, inventories = self.fleet()
        phases["fleet (clones, prepare, warm-up)"] = time.time() - t0
        t0 = time.time()
        self.noop(names, inventories)
        phases["no-op runs"] = time.time() - t0
        t0 = time.time()
        self.gpu_facts(names, inventories)
        phases["gpu_facts"] = time.time() - t0
        self.results["meta"] = self.meta(started, phases)
        self.results["notes"] = self.notes
        self.results["config"] = self.cfg.as_dict()
        return self.results

    def meta(self, started, phases):
        def out(argv):
            proc = sh(argv, check=False)
            return proc.stdout.strip() if proc.returncode == 0 else "?"

        rev = out(["git", "-C", ROOT, "rev-parse", "--short", self.cfg.ref or "HEAD"])
        dirty = "" if self.cfg.ref or not out(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"]) \
            else " + uncommitted changes"
        knobs = " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in sorted(os.environ.items()) if k.startswith("BENCH_"))
        return {
            "command": (knobs + " make bench").strip(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "source": "%s (%s%s)" % (self.cfg.ref or "working tree", rev, dirty),
            "machine": "%s CPU(s), %s, kernel %s" % (
                os.cpu_count(), out(["sh", "-c", ". /etc/os-release; echo $PRETTY_NAME"]), os.uname().release),
            "ansible": out([os.path.join(VENV_BIN, "ansible"), "--version"]).splitlines()[0],
            "podman": out(["podman", "version", "--format", "{{.Client.Version}}"]),
            "openssh": out(["sh", "-c", "ssh -V 2>&1"]),
            "wall_s": time.time() - started,
            "phases_s": phases,
        }

    def cleanup(self):
        if self.cfg.keep:
            log("BENCH_KEEP=1: kept nodes %s and images %s" % (" ".join(self.nodes), " ".join(self.images)))
            return
        self.remove_nodes(list(self.nodes))
        shutil.rmtree(NODE_ARCHIVES, ignore_errors=True)
        for image in self.images:
            sh(["podman", "rmi", "-f", image], check=False)
        self.images = []


# --- the table -----------------------------------------------------------------------------------


def short(text, width=90):
    return text if len(text) <= width else text[: width - 3] + "..."


def fmt_s(value):
    return "-" if value is None else ("%.1f" % value if value >= 10 else "%.2f" % value)


def fmt_ratio(value):
    return "-" if value is None else "%.1fx" % value


def table(headers, rows, markdown):
    if markdown:
        lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(["---"] * len(headers)) + "|"]
        lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h)) for i, h in enumerate(headers)]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(headers, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)) for row in rows]
    return "\n".join(lines)


def cpu_pair(measured, floor, key):
    """``measured / floor`` CPU seconds per node of one kind (controller or nodes), for the tables."""
    return "%s / %s" % (fmt_s(measured.get(key)), fmt_s(floor.get(key)))


def render(results, markdown=False):
    meta, cfg = results["meta"], results["config"]
    h = (lambda text: "## " + text) if markdown else (lambda text: "\n" + text + "\n" + "=" * len(text))
    out = []
    title = "gpufleet.nvidia bench: the cost of a converge"
    out.append(("# " + title) if markdown else title)
    out.append("")
    bullet = "- " if markdown else ""
    out.append("%s%s: `%s`, measuring %s" % (bullet, meta["date"], meta.get("command", "make bench"), meta["source"]))
    out.append("%s%s; %s; podman %s; %s" % (bullet, meta["machine"], meta["ansible"], meta["podman"], meta["openssh"]))
    out.append("%smedians of %d run(s) (first converge: %d); forks %d; bench wall time %.0fs (%s)" % (
        bullet, cfg["runs"], cfg["first_runs"], cfg["forks"], meta["wall_s"],
        ", ".join("%s %.0fs" % (k, v) for k, v in meta["phases_s"].items())))

    out.append("")
    out.append(h("1. No-op site.yml on converged nodes, next to the floor (facts + one module per node)"))
    out.append("")
    rows = []
    for r in results["noop"]:
        rows.append([
            r["transport"], r["n"],
            fmt_s(r["site_median_s"]), fmt_s(r["floor_median_s"]), fmt_ratio(r["ratio"]),
            fmt_s(r["site_median_s"] / r["n"]), fmt_s(r["floor_median_s"] / r["n"]),
        ])
    out.append(table(["transport", "nodes", "site.yml s", "floor s", "site/floor", "site.yml s/node", "floor s/node"],
                     rows, markdown))
    out.append("")
    out.append("What each node costs, per run (site.yml / floor):")
    out.append("")
    rows = []
    for r in results["noop"]:
        s, f = r["site"], r["floor"]
        sc, fc = r.get("site_cpu_median") or {}, r.get("floor_cpu_median") or {}
        rows.append([
            r["transport"], r["n"],
            "%g / %g" % (s["tasks"], f["tasks"]),
            "%g / %g" % (s["modules"], f["modules"]),
            fmt_ratio(s["modules"] / f["modules"] if f["modules"] else None),
            cpu_pair(sc, fc, "controller_per_node_s"), cpu_pair(sc, fc, "nodes_per_node_s"),
            "%g" % s["changed"],
        ])
    out.append(table(["transport", "nodes", "tasks/node", "modules/node", "modules site/floor",
                      "controller CPU s/node", "node CPU s/node", "changed/node"], rows, markdown))
    out.append("")
    out.append("Its host layers alone (site.yml --tags driver,toolkit: discovery and preflight, the driver, the "
               "toolkit and the runtime, the report; no validation, no cluster), next to the same floor runs:")
    out.append("")
    rows = []
    for r in results["noop"]:
        if not r.get("layers"):
            continue
        s, f = r["layers"], r["floor"]
        sc, fc = r.get("layers_cpu_median") or {}, r.get("floor_cpu_median") or {}
        rows.append([
            r["transport"], r["n"], fmt_s(r["layers_median_s"]), fmt_s(r["floor_median_s"]),
            fmt_ratio(r["layers_ratio"]), fmt_s(r["layers_median_s"] / r["n"]),
            "%g / %g" % (s["tasks"], f["tasks"]), "%g / %g" % (s["modules"], f["modules"]),
            cpu_pair(sc, fc, "controller_per_node_s"), cpu_pair(sc, fc, "nodes_per_node_s"),
            "%g" % s["changed"],
        ])
    out.append(table(["transport", "nodes", "host layers s", "floor s", "layers/floor", "layers s/node",
                      "tasks/node", "modules/node", "controller CPU s/node", "node CPU s/node", "changed/node"],
                     rows, markdown))
    out.append("")
    out.append("tasks = task results ok/changed/failed per node (skipped not counted; the report play's %s tasks on "
               "localhost, once per run, not included); modules = module runs on the node (loop items and retries "
               "each count; controller-only actions and tasks delegated to localhost do not; copy/template/get_url "
               "may run more than one module per task); controller CPU = ansible-playbook, its workers and the "
               "ssh/podman clients; node CPU = the node containers' cgroups (sshd, the modules, what they run). "
               "Medians; the nodes share this machine's CPUs with the controller."
               % (results["noop"][0]["site"]["localhost_tasks"] if results["noop"] else "-"))

    biggest = {}
    for r in results["noop"]:
        if r["n"] >= biggest.get(r["transport"], {"n": 0})["n"]:
            biggest[r["transport"]] = r
    for transport, r in biggest.items():
        s = r["site"]
        out.append("")
        out.append("Where a no-op site.yml on %d node(s) through %s spent its %.1fs (last run): %.1fs in %d tasks "
                   "(the rest: Python, inventory and playbook loading); the slowest tasks, start to the next "
                   "task's start:" % (r["n"], transport, r["site_s"][-1], s.get("tasks_total_s") or 0,
                                      s.get("task_count") or 0))
        out.append("")
        out.append(table(["task", "action", "s"],
                         [[short(t["task"]), t["action"], "%.2f" % t["seconds"]] for t in s.get("top_tasks", [])],
                         markdown))

    out.append("")
    out.append(h("2. First converge of a fresh node, next to the same installs and writes done by a shell script"))
    out.append("")
    rows = []
    for r in results["first"]:
        sc, fc = r.get("site_cpu_median") or {}, r.get("floor_cpu_median") or {}
        rows.append([r["os"], r["transport"], fmt_s(r["site_median_s"]), fmt_s(r["floor_median_s"]),
                     fmt_ratio(r["ratio"]),
                     cpu_pair(sc, fc, "controller_per_node_s"), cpu_pair(sc, fc, "nodes_per_node_s"),
                     r["packages"], "yes" if all(r["same_state"]) else "NO", len(r["site_s"])])
    out.append(table(["os", "transport", "site.yml s", "floor-converge.sh s", "site/floor",
                      "controller CPU s (site / floor)", "node CPU s (site / floor)", "packages installed",
                      "same end state", "runs"], rows, markdown))
    out.append("")
    for ref in results["reference"]:
        out.append("reference converge of %s (%s, apt cache %s): %.1fs" % (
            " + ".join(ref["nodes"]), ref["transport"], ref["apt_cache"], ref["wall_s"]))

    out.append("")
    out.append(h("3. gpu_facts alone"))
    out.append("")
    rows = []
    for os_name, fig in sorted(results["gpu_facts"].get("in_node", {}).items()):
        probes = fig.get("probes", {})
        proc = fig.get("module_process", {})
        rows.append(["in a %s node (podman exec)" % os_name, "probes in-process",
                     "%.1f ms" % (probes.get("median_s", 0) * 1000), "%d command(s)" % probes.get("commands", 0)])
        rows.append(["in a %s node (podman exec)" % os_name, "module (AnsiballZ) as a process",
                     "%.1f ms" % (proc.get("median_s", 0) * 1000) if "median_s" in proc else "failed", ""])
    for a in results["gpu_facts"].get("ansible", []):
        rows.append(["ansible -m gpufleet.nvidia.gpu_facts, %d node(s)" % a["n"], a["transport"],
                     "%.2f s" % a["median_s"], "%.2f s/node" % (a["median_s"] / a["n"])])
    out.append(table(["where", "how", "median", ""], rows, markdown))
    if results.get("notes"):
        out.append("")
        out.append(h("Notes"))
        out.append("")
        out += ["- " + n for n in results["notes"]]
    return "\n".join(out) + "\n"


def main():
    if os.geteuid() != 0:
        sys.stderr.write("bench/converge.py must run as root (rootful podman)\n")
        return 1

    def on_term(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    try:
        cfg = Config()
    except BenchError as exc:
        sys.stderr.write("ERROR: %s\n" % exc)
        return 2
    bench = Bench(cfg)
    try:
        results = bench.run()
    except BenchError as exc:
        sys.stderr.write("ERROR: %s\n" % exc)
        return 1
    finally:
        bench.cleanup()
    text = render(results)
    sys.stdout.write(text)
    os.makedirs(RESULTS, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for path in (os.path.join(RESULTS, "latest.json"), os.path.join(RESULTS, "bench-%s.json" % stamp)):
        with open(path, "w") as handle:
            json.dump(results, handle, indent=1, sort_keys=True)
    with open(os.path.join(RESULTS, "latest.md"), "w") as handle:
        handle.write(render(results, markdown=True))
    log("written: bench/results/latest.md, bench/results/latest.json (and bench-%s.json)" % stamp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
