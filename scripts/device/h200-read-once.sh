#!/usr/bin/env bash
# Read only, on a lent GPU machine: what a run of site.yml that changes nothing costs, with
# discovery's validation reused (gpufleet_reuse_discovery, the default) and without, next to the
# floor of any play (bench/floor.yml: gather the facts, one module), through the local
# connection. site.yml runs its discover, driver (pre-installed driver: verified, never touched)
# and validate plays and the report, with and without the host CUDA test (nvcc is on the
# machine). The toolkit play is left out: the machine has no container runtime and no
# package repository. Nothing on the machine is changed.
#   OUT=/some/dir RUNS=5 bash scripts/device/h200-read-once.sh
# Needs ansible-core importable (PYTHONPATH) and ansible-playbook on PATH.
set -uo pipefail
out=${OUT:?OUT must name the output directory}
runs=${RUNS:-5}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$root/.cache/collections/ansible_collections/gpufleet" "$out/logs"
ln -sfn "$root" "$root/.cache/collections/ansible_collections/gpufleet/nvidia"
export ANSIBLE_COLLECTIONS_PATH=$root/.cache/collections ANSIBLE_PIPELINING=1 ANSIBLE_FORCE_COLOR=0
export ANSIBLE_CALLBACK_PLUGINS=$root/bench/callback_plugins ANSIBLE_CALLBACKS_ENABLED=bench_count
export LC_ALL=C.UTF-8 PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:$PATH
py=$(command -v python3)
common=(-i "localhost," -c local -e "ansible_python_interpreter=$py")
site=(-e nvidia_driver_method=preinstalled -e nvidia_driver_version=580 -e container_toolkit_runtime=none
  --tags "discover,driver,validate")

sums() { find /etc/apt /etc/cdi /etc/containerd /etc/systemd/system -type f 2>/dev/null | sort | xargs -r sha256sum; }
sums > "$out/logs/checksums-before.txt"

one() {  # one NAME ARGS...: a timed run, its log, its counts
  local name=$1 start end
  shift
  start=$(date +%s.%N)
  BENCH_COUNT_FILE="$out/logs/$name.count.json" ansible-playbook "${common[@]}" "$@" > "$out/logs/$name.log" 2>&1
  local rc=$?
  end=$(date +%s.%N)
  awk -v n="$name" -v r="$rc" -v s="$start" -v e="$end" 'BEGIN { printf "%s %s %.3f\n", n, r, e - s }' >> "$out/logs/times.txt"
}

# One warm-up of each, then the runs interleaved so that drift of the machine hits all alike.
for cuda in true false; do
  one "warmup-reuse-cuda-$cuda" "${site[@]}" -e "validate_host_cuda=$cuda" -e "report_dir=$out/logs/report-warmup" "$root/playbooks/site.yml"
done
for i in $(seq 1 "$runs"); do
  for cuda in true false; do
    for reuse in true false; do
      one "site-reuse-$reuse-cuda-$cuda-$i" "${site[@]}" -e "validate_host_cuda=$cuda" -e "gpufleet_reuse_discovery=$reuse" -v \
        -e "report_dir=$out/logs/report-reuse-$reuse-cuda-$cuda" "$root/playbooks/site.yml"
    done
  done
  one "floor-$i" "$root/bench/floor.yml"
done
sums > "$out/logs/checksums-after.txt"

"$py" - "$out" <<'PY'
import glob, json, os, re, statistics, sys
out = sys.argv[1]
logs = os.path.join(out, "logs")
times = {}
for line in open(os.path.join(logs, "times.txt")):
    name, rc, sec = line.split()
    if name.startswith("warmup"):
        continue
    key = re.sub(r"-\d+$", "", name)
    times.setdefault(key, []).append((int(rc), float(sec), name))
lines = ["| run | median s | runs | failed | module runs | tasks | reused |", "|---|---|---|---|---|---|---|"]
floor = statistics.median(s for rc, s, n in times["floor"])
for key in sorted(times):
    entries = times[key]
    counts = [json.load(open(os.path.join(logs, n + ".count.json")))["hosts"]["localhost"] for rc, s, n in entries]
    reused = sum(open(os.path.join(logs, n + ".log")).read().count('"reused": true') for rc, s, n in entries)
    med = statistics.median(s for rc, s, n in entries)
    lines.append("| %s | %.2f (%.1fx floor) | %d | %d | %s | %s | %d |" % (
        key, med, med / floor, len(entries), sum(1 for rc, s, n in entries if rc),
        "/".join(str(c["modules"]) for c in counts), "/".join(str(c["tasks"]) for c in counts), reused))
same = []
for cuda in ("true", "false"):
    pair = []
    for reuse in ("true", "false"):
        with open(os.path.join(logs, "report-reuse-%s-cuda-%s" % (reuse, cuda), "gpufleet-report.json")) as f:
            report = json.load(f)
        pair.append([dict((k, v) for k, v in n.items()) for n in report["nodes"]])
    same.append("cuda %s: the report's node rows %s with and without reuse" % (cuda, "are the same" if pair[0] == pair[1] else "DIFFER"))
before = open(os.path.join(logs, "checksums-before.txt")).read()
after = open(os.path.join(logs, "checksums-after.txt")).read()
text = "\n".join(lines + [""] + same + ["/etc/apt /etc/cdi /etc/containerd /etc/systemd/system: %s" % ("unchanged" if before == after else "CHANGED")])
open(os.path.join(out, "summary.md"), "w").write(text + "\n")
print(text)
PY
tar -C "$out" -czf "$out/logs.tar.gz" logs && rm -rf "$out/logs"
