# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU nodes of the cluster, as the inventory declares them and discovery found them.

:func:`fleet_nodes` (the ``gpu_fleet_nodes`` filter) reads each host of the node group's own
variables (``HOST_VARS``) and its discovery facts, once, into the nodes every cluster plan starts
from; what is wrong with a host is a problem of the fleet, never a node left out.
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import host_fact, plain
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery import gpu_table
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.cluster.checks import (
    DNS_SUBDOMAIN, check_label_value, one_of, quoted, to_bool,
)

DRIVER_METHODS = ("package", "preinstalled", "operator")
HOST_DRIVER_METHODS = ("package", "preinstalled")
RUNTIMES = ("containerd", "crio", "docker", "k3s", "rke2", "none")
# The per-host inventory variables the cluster layer reads.
HOST_VARS = (
    "gpufleet_node_name",
    "nvidia_driver_method",
    "container_toolkit_enabled",
    "container_toolkit_runtime",
    "gpufleet_sharing_config",
    "gpufleet_mig_config",
    # The container_toolkit role's switches that decide whether the node's runtime hands over
    # CDI devices (defaults as in that role: TOOLKIT_ENABLE_CDI_DEFAULT, set_as_default false).
    "container_toolkit_enable_cdi",
    "container_toolkit_set_as_default",
)
#: roles/container_toolkit's default of container_toolkit_enable_cdi (role defaults are not in
#: hostvars); CDI on, as NVIDIA's own since toolkit 1.18 and GPU Operator 25.10.
TOOLKIT_ENABLE_CDI_DEFAULT = True


def discovered_gpus(facts):
    """What discovery found on a node, as the cluster plan uses it; None when it did not read it."""
    if not isinstance(facts, dict) or not facts:
        return None
    smi = ((facts.get("driver") or {}).get("nvidia_smi") or {})
    return {
        "count": facts.get("gpu_count") or 0,
        "smi": [
            {"name": g.get("name"), "mig_capable": bool(g.get("mig_capable")), "memory_total_mib": g.get("memory_total_mib")}
            for g in smi.get("gpus") or [] if isinstance(g, dict)
        ],
        # What the PCI bus says of each GPU, for when nvidia-smi does not answer.
        "pci": [
            {"name": g.get("name"), "device_id": g.get("device_id"), "mig_capable": gpu_table.mig_capable(g.get("device_id") or "")}
            for g in facts.get("gpus") or [] if isinstance(g, dict)
        ],
    }


def discovered_runtime_version(facts, runtime):
    """The version discovery found of the node's containerd or CRI-O; None otherwise (k3s and
    RKE2 embed a containerd whose version discovery does not read)."""
    if not isinstance(facts, dict) or runtime not in ("containerd", "crio"):
        return None
    found = ((facts.get("container") or {}).get(runtime) or {}).get("version")
    return found if isinstance(found, str) and found else None


def _run_problem(host, where, run):
    """A node this run set out to discover and did not: its state is unknown."""
    if not isinstance(run, dict) or not run.get("discovered"):
        return None
    if host in (run.get("hosts") or []) and host not in (run.get("reached") or []):
        return (
            "%s: failed or was unreachable in this run before the cluster layer, so how it is prepared now is not "
            "known; the cluster change is refused for the whole fleet, not planned without it (fix the host, or "
            "leave it out of this run with --limit '!%s', which plans it from the inventory)" % (where, host)
        )
    return None


def fleet_nodes(hosts, hostvars, role, run=None):
    """The GPU nodes the inventory declares, as the cluster layer sees them.

    ``hosts`` is the inventory group that declares the cluster's GPU nodes (all of it, whatever
    an earlier play did with a host). Per host (inventory variables; defaults in brackets):
    ``nvidia_driver_method`` (required: package, preinstalled or operator), ``gpufleet_node_name``
    [the inventory name], ``container_toolkit_enabled`` [true unless the driver method is
    operator], ``container_toolkit_runtime`` [containerd], ``gpufleet_sharing_config`` [none: the
    default config] and ``gpufleet_mig_config`` [none]. A host is *prepared* for a component when
    this collection put it on the host: the driver when the method is package or preinstalled,
    the toolkit when its role is enabled.

    ``run`` (site.yml's record of its discovery: ``{discovered, hosts, reached}``) makes a node
    that this run failed to discover a problem, never a node left out.
    """
    if hosts is None:
        hosts = []
    if isinstance(hosts, str) or not isinstance(hosts, (list, tuple)):
        return {"nodes": [], "problems": ["%s: the node group is not a list of hosts (got %s)" % (role, quoted(hosts))]}
    problems, nodes, seen = [], [], {}
    run = _run_lookup(run)
    for host in hosts:
        if host not in hostvars:
            problems.append("%s: host %s of the node group is not in the inventory" % (role, quoted(host)))
            continue
        nodes.append(_fleet_node(host, hostvars[host], "%s: host %s" % (role, quoted(host)), run, seen, problems))
    nodes.sort(key=lambda n: (str(n["name"]), str(n["host"])))
    return {"nodes": nodes, "problems": problems}


def _run_lookup(run):
    """The run's record with sets for its hosts, looked up once per node (its lists would make
    the lookups quadratic in the fleet's size): ``hosts`` and ``reached`` (discovery), ``failed``
    (nodes whose host layer failed in this run) and ``moved`` (nodes moved from the operator's
    driver to the host's before the host layers)."""
    if not isinstance(run, dict):
        return run
    found = dict(run)
    for key in ("hosts", "reached", "failed", "moved"):
        found[key] = set(run.get(key) or [])
    return found


def _held(host, run):
    """``(held, moved_back)``: the node's host layer failed in this run, so the parts of the
    cluster change that rely on it are held back; a node that was moving from the operator's
    driver to the host's goes back to the operator's."""
    if not isinstance(run, dict) or host not in run.get("failed", ()):
        return False, False
    return True, host in run.get("moved", ())


def _fleet_node(host, raw, where, run, seen, problems):
    """One host of the node group as a node of the plan; what is wrong with it goes to ``problems``."""
    hv = dict((k, plain(raw[k])) for k in HOST_VARS if k in raw)
    failed = _run_problem(host, where, run)
    if failed:
        problems.append(failed)
    name = _node_name(hv.get("gpufleet_node_name") or host, host, where, seen, problems)
    method = _driver_method(hv, where, problems)
    host_toolkit = to_bool(hv.get("container_toolkit_enabled", method != "operator"), "%s: container_toolkit_enabled" % where, problems)
    held, moved_back = _held(host, run)
    if moved_back:
        method, host_toolkit = "operator", False
    runtime = hv.get("container_toolkit_runtime", "containerd")
    if runtime not in RUNTIMES:
        problems.append(
            "%s: container_toolkit_runtime %s is not a container runtime (expected %s)" % (where, quoted(runtime), one_of(RUNTIMES))
        )
    sharing = hv.get("gpufleet_sharing_config") or ""
    mig = hv.get("gpufleet_mig_config") or ""
    for var, value in (("gpufleet_sharing_config", sharing), ("gpufleet_mig_config", mig)):
        check_label_value(value, "%s: %s" % (where, var), problems)
    return {
        "host": host,
        "name": name,
        "driver_method": method,
        "host_driver": method in HOST_DRIVER_METHODS,
        "host_toolkit": host_toolkit,
        "runtime": runtime,
        "sharing_config": sharing,
        "mig_config": mig,
        "gpus": plain(discovered_gpus(host_fact(raw, "gpufleet_nvidia"))),
        "runtime_version": discovered_runtime_version(host_fact(raw, "gpufleet_nvidia"), runtime),
        "cdi_ready": _cdi_ready(hv, where, problems),
        "operator_driver": ((host_fact(raw, "gpufleet_nvidia") or {}).get("driver") or {}).get("source") == "operator",
        "held": held,
        "moved_back": moved_back,
    }


def _cdi_ready(hv, where, problems):
    """Why the node's runtime, as the container_toolkit role configures it, hands a pod the CDI
    devices the device plugin names: ``default_runtime`` (nvidia its default runtime: the NVIDIA
    runtime reads the CDI annotations itself), ``enable_cdi`` (CDI on in the runtime), or ``""``."""
    cdi = to_bool(hv.get("container_toolkit_enable_cdi", TOOLKIT_ENABLE_CDI_DEFAULT), "%s: container_toolkit_enable_cdi" % where,
                  problems)
    default = to_bool(hv.get("container_toolkit_set_as_default", False), "%s: container_toolkit_set_as_default" % where, problems)
    return "default_runtime" if default else "enable_cdi" if cdi else ""


def _node_name(name, host, where, seen, problems):
    """The node's name in the cluster, checked, and recorded in ``seen`` (name -> host)."""
    if not isinstance(name, str) or len(name) > 253 or not DNS_SUBDOMAIN.fullmatch(name):
        problems.append(
            "%s: gpufleet_node_name %s is not a Kubernetes node name (expected lower-case "
            "alphanumerics, '-' and '.'; set gpufleet_node_name to the node's name in the cluster)"
            % (where, quoted(name))
        )
    elif name in seen:
        problems.append(
            "%s: gpufleet_node_name %s is also the node of host %s (expected one host per node)"
            % (where, quoted(name), quoted(seen[name]))
        )
    else:
        seen[name] = host
    return name


def _driver_method(hv, where, problems):
    """The declared ``nvidia_driver_method``; a problem when it is missing (then package) or unknown."""
    if "nvidia_driver_method" not in hv:
        problems.append(
            "%s: nvidia_driver_method is not set in the inventory, so how the node is prepared is not declared "
            "(expected %s for every node of the GPU node group)" % (where, one_of(DRIVER_METHODS))
        )
    method = hv.get("nvidia_driver_method", "package")
    if method not in DRIVER_METHODS:
        problems.append(
            "%s: nvidia_driver_method %s is not a driver method (expected %s)" % (where, quoted(method), one_of(DRIVER_METHODS))
        )
    return method


def nodes_of(fleet, s):
    """The nodes of gpu_fleet_nodes' output, as the plan of the role of settings ``s`` starts from
    them; the fleet's problems, or that it has no node, go to ``s.problems``."""
    if not isinstance(fleet, dict) or "nodes" not in fleet:
        s.problems.append("%s: the fleet is not the output of gpufleet.nvidia.gpu_fleet_nodes" % s.prefix)
        return []
    nodes = fleet["nodes"]
    s.problems.extend(fleet.get("problems", []))
    if not nodes and not s.problems:
        s.problems.append(
            "%s_node_group: no GPU nodes in group %s (expected the inventory group that declares every GPU node of "
            "the cluster, each with its nvidia_driver_method; or gpufleet_gpu_node_group set to that group)"
            % (s.prefix, quoted(s.get("node_group")))
        )
    return nodes


def held_back(nodes):
    """What of the change is held back for the nodes whose host layer failed in this run."""
    held = []
    for node in nodes:
        if node.get("moved_back"):
            held.append("%s: its host layer failed while it moved from the GPU Operator's driver to the host's: it goes "
                        "back to the operator's driver (planned as driver_method operator), and stays cordoned" % node["host"])
        elif node.get("held"):
            held.append("%s: its host layer failed: its node labels are left as they are" % node["host"])
    return held
