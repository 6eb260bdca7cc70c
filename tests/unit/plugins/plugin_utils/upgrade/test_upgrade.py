"""The rolling upgrade's decisions (module_utils/upgrade.py): batches, node plans, stop on failure."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ansible.executor.playbook_executor import PlaybookExecutor

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.upgrade import batches as upgrade
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError


def ansible_batches(hosts, serial_list):
    """What Ansible itself cuts: PlaybookExecutor._get_serialized_batches on a stub inventory."""
    inventory = SimpleNamespace(get_hosts=lambda pattern, order=None: list(hosts))
    executor = SimpleNamespace(_inventory=inventory)
    play = SimpleNamespace(hosts="gpufleet_gpu_nodes", order=None, serial=serial_list)
    return PlaybookExecutor._get_serialized_batches(executor, play)  # pylint: disable=protected-access


def names(count):
    return ["gpu-%02d" % i for i in range(1, count + 1)]


# (serial spec, number of hosts, batch sizes)
BATCHES = [
    (1, 3, [1, 1, 1]),
    (2, 5, [2, 2, 1]),
    ("2", 3, [2, 1]),
    (10, 3, [3]),
    ("50%", 5, [2, 2, 1]),
    ("30%", 10, [3, 3, 3, 1]),
    ("29%", 100, [28, 28, 28, 16]),  # Ansible's float arithmetic: 0.29 * 100 = 28.999...
    ("1%", 3, [1, 1, 1]),  # a percentage of none rounds up to one node
    ("100%", 4, [4]),
    ([1, "50%"], 5, [1, 2, 2]),
    ([1, 2, "100%"], 6, [1, 2, 3]),
    ([1, 0], 4, [1, 3]),  # 0: every remaining node
    (0, 3, [3]),
    (-1, 3, [3]),
    ([], 3, [3]),
    (3, 0, []),
]


@pytest.mark.parametrize("spec, count, sizes", BATCHES)
def test_batches_are_the_ones_ansible_cuts(spec, count, sizes):
    hosts = names(count)
    got = upgrade.batches(hosts, spec)
    assert [len(b) for b in got] == sizes
    assert [h for b in got for h in b] == hosts
    assert got == ansible_batches(hosts, upgrade.parse_serial(spec))


@pytest.mark.parametrize("spec", [True, False, None, "abc", "2.5%", "%", 1.5, [1, "x"], [None], {"size": 1}])
def test_a_batch_size_that_is_not_one_is_refused_naming_it(spec):
    with pytest.raises(GpuFleetError) as err:
        upgrade.batches(names(3), spec)
    assert err.value.msg.startswith("upgrade_batch: ")
    assert "is not a batch size (expected a number of nodes (2), a percentage of the GPU nodes ('25%'), or a list of them" in err.value.msg


@pytest.mark.parametrize("spec, text", [(1, "1 at a time"), ("25%", "25% at a time"), ([1, "50%"], "1, then 50%"), ([], "all at once")])
def test_describe_serial(spec, text):
    assert upgrade.describe_serial(spec) == text


# --- one node's plan ------------------------------------------------------------------------------


def validation(loaded="580.95.05", installed=None, status="ok", driver="ok", version_status="ok", installed_status="ok", failed=()):
    return {
        "status": status,
        "driver": {"loaded": loaded, "installed": installed or loaded},
        "checks": [
            {"name": "gpus", "status": "ok", "msg": "8 NVIDIA GPUs on the PCI bus"},
            {"name": "driver", "status": driver, "msg": "nvidia-smi answers" if driver == "ok" else "nvidia-smi failed: no devices"},
            {"name": "driver_version", "status": version_status,
             "msg": "loaded driver %s is the declared 580" % loaded if version_status == "ok" else "declared driver 580, loaded %s" % loaded},
            {"name": "driver_installed", "status": installed_status,
             "msg": "the driver on disk is the loaded one" if installed_status == "ok"
             else "the driver on disk (580.95.05) is not the loaded one (570.86.15): a reboot is due"},
        ],
        "failed": list(failed),
    }


def drain_read(ready=True, gpus="8", resource="nvidia.com/gpu", cordoned_by=None, unschedulable=False, pods=(), blocked=()):
    alloc = {resource: gpus} if gpus is not None else {}
    return {
        "node": {"name": "gpu-a", "ready": ready, "ready_reason": "kubelet is posting ready status" if ready else "container runtime down",
                 "unschedulable": unschedulable, "cordoned_by": cordoned_by, "allocatable": alloc},
        "evicted": list(pods),
        "blocked": list(blocked),
        "left": [],
    }


def node(**overrides):
    data = {
        "host": "gpu-a",
        "node": "gpu-a",
        "method": "package",
        "version": "580",
        "cluster": True,
        "facts": {"gpu_count": 8, "driver": {"version": "580.95.05"}},
        "validation": validation(),
        "drain": drain_read(),
        "resource": "nvidia.com/gpu",
        "replicas": 1,
    }
    data.update(overrides)
    return data


MIG_FACTS = {"gpu_count": 8, "driver": {"nvidia_smi": {"gpus": [{"mig_mode_current": "enabled"}]}}}

PLANS = [
    # (case, overrides, state, reason)
    ("up to date", {}, "up_to_date",
     "driver 580.95.05 loaded (declared 580), validation ok, node Ready and advertising its GPUs"),
    ("up to date, drifted toolkit", {"validation": validation(status="drift")}, "up_to_date",
     "driver 580.95.05 loaded (declared 580), validation drift, node Ready and advertising its GPUs"),
    ("up to date, cordoned by someone else", {"drain": drain_read(unschedulable=True)}, "up_to_date",
     "driver 580.95.05 loaded (declared 580), validation ok, node Ready and advertising its GPUs"),
    ("up to date, not a Kubernetes node", {"cluster": False, "drain": {}}, "up_to_date",
     "driver 580.95.05 loaded (declared 580), validation ok"),
    ("up to date, on-disk driver not checked", {"validation": validation(installed_status="skipped")}, "up_to_date",
     "driver 580.95.05 loaded (declared 580), validation ok, node Ready and advertising its GPUs"),
    ("old driver", {"validation": validation(loaded="570.86.15", status="drift", version_status="drift")}, "planned",
     "declared driver 580, loaded 570.86.15"),
    ("installed, reboot pending", {"validation": validation(status="drift", installed_status="drift")}, "planned",
     "the driver on disk (580.95.05) is not the loaded one (570.86.15): a reboot is due"),
    ("driver broken", {"validation": validation(status="failed", driver="failed", failed=["nvidia-smi failed: no devices"])}, "planned",
     "nvidia-smi failed: no devices"),
    ("validation failed elsewhere", {"validation": validation(status="failed", failed=["containerd has no runtime handler 'nvidia'"])},
     "planned", "validation failed: containerd has no runtime handler 'nvidia'"),
    ("not validated", {"validation": {}}, "planned", "not validated"),
    ("node not Ready", {"drain": drain_read(ready=False)}, "planned", "node gpu-a is not Ready (container runtime down)"),
    ("GPUs not advertised", {"drain": drain_read(gpus="4")}, "planned", "node gpu-a advertises 4 nvidia.com/gpu, expected 8"),
    ("shared GPUs", {"replicas": 4, "resource": "nvidia.com/gpu.shared", "drain": drain_read(gpus="32", resource="nvidia.com/gpu.shared")},
     "up_to_date", "driver 580.95.05 loaded (declared 580), validation ok, node Ready and advertising its GPUs"),
    ("shared GPUs, plain count", {"replicas": 4, "drain": drain_read(gpus="8")}, "planned",
     "node gpu-a advertises 8 nvidia.com/gpu, expected 32"),
    ("MIG, devices", {"facts": MIG_FACTS, "drain": dict(drain_read(), node=dict(drain_read()["node"], allocatable={"nvidia.com/mig-1g.10gb": "14"}))},
     "up_to_date", "driver 580.95.05 loaded (declared 580), validation ok, node Ready and advertising its GPUs"),
    ("MIG, nothing", {"facts": MIG_FACTS, "drain": drain_read(gpus=None)}, "planned",
     "node gpu-a advertises no nvidia.com/gpu or nvidia.com/mig-* (MIG enabled)"),
    ("left cordoned by an earlier upgrade", {"drain": drain_read(unschedulable=True, cordoned_by="gpufleet.nvidia driver upgrade to 580")},
     "planned", "node gpu-a is still cordoned by an earlier upgrade (gpufleet.nvidia driver upgrade to 580)"),
    ("preinstalled", {"method": "preinstalled"}, "not_applicable",
     "nvidia_driver_method is preinstalled: the driver comes with the node's image and this collection installs none; "
     "move the node to a new image instead"),
    ("operator", {"method": "operator"}, "not_applicable",
     "nvidia_driver_method is operator: the GPU Operator's driver container is upgraded through the operator's driver.version"),
]


@pytest.mark.parametrize("case, overrides, state, reason", PLANS, ids=[p[0] for p in PLANS])
def test_node_plan(case, overrides, state, reason):  # pylint: disable=unused-argument
    plan = upgrade.node_plan(node(**overrides))
    assert (plan["state"], plan["reason"]) == (state, reason)
    assert plan["action"] == ("upgrade" if state == "planned" else "skip")


def test_node_plan_gives_every_reason():
    plan = upgrade.node_plan(node(validation=validation(loaded="570.86.15", status="drift", version_status="drift"),
                                  drain=drain_read(ready=False, gpus="0")))
    assert plan["reason"] == (
        "declared driver 580, loaded 570.86.15; node gpu-a is not Ready (container runtime down); "
        "node gpu-a advertises 0 nvidia.com/gpu, expected 8"
    )


def test_node_plan_keeps_what_the_drain_and_the_wait_need():
    read = drain_read(gpus="8", pods=["ml/a", "ml/b"], blocked=[{"pod": "ml/b", "pdb": "ml/pdb"}])
    plan = upgrade.node_plan(node(replicas=2, drain=read))
    assert plan["expect"] == {"resource": "nvidia.com/gpu", "count": 16, "mig": False}
    assert plan["pods"] == ["ml/a", "ml/b"]
    assert upgrade.actions(plan) == (
        "cordon, evict 2 GPU pods (ml/a, ml/b) - blocked now: ml/b by PodDisruptionBudget ml/pdb, "
        "install driver 580 and reboot if the driver needs it, wait until it is Ready and advertises 16 nvidia.com/gpu, "
        "validate, uncordon"
    )
    assert upgrade.actions(dict(plan, cluster=False)) == "install driver 580 and reboot if the driver needs it, validate"


@pytest.mark.parametrize("overrides, msg", [
    ({"version": ""}, "upgrade: gpu-a: nvidia_driver_version is not set: declare the driver to upgrade to, a branch (580) or a release (580.95.05)"),
    ({"version": "5x5"}, "upgrade: gpu-a: nvidia_driver_version: version '5x5' is not a driver version"),
    ({"method": "rpm"}, "upgrade: gpu-a: nvidia_driver_method 'rpm' is not a driver method (expected package, preinstalled or operator)"),
])
def test_node_plan_refuses_what_cannot_be_upgraded(overrides, msg):
    with pytest.raises(GpuFleetError) as err:
        upgrade.node_plan(node(**overrides))
    assert err.value.msg.startswith(msg)


# --- the run so far -------------------------------------------------------------------------------


def planned(**extra):
    result = {"state": "planned", "action": "upgrade", "reason": "declared driver 580, loaded 570.86.15", "declared": "580",
              "cluster": True, "pods": [], "blocked": [], "expect": {"resource": "nvidia.com/gpu", "count": 8, "mig": False}}
    result.update(extra)
    return result


def failed(stage, msg, task="Evict the node's GPU pods"):
    return planned(state="failed", stage=stage, task=task, msg=msg)


UPGRADED = planned(state="upgraded", stage=None, msg="driver 580.95.05 loaded")
UP_TO_DATE = planned(state="up_to_date", action="skip", reason="driver 580.95.05 loaded (declared 580), validation ok")


def test_a_failure_in_batch_2_of_3_stops_batch_3():
    hosts = ["gpu-a", "gpu-b", "gpu-c"]
    results = {"gpu-a": UPGRADED, "gpu-b": failed("drain", "1 GPU pod still on the node after 900 s"), "gpu-c": planned()}
    got = upgrade.progress(hosts, 1, results)
    assert got["batches"] == [["gpu-a"], ["gpu-b"], ["gpu-c"]]
    assert got["stopped"] == {"host": "gpu-b", "batch": 2, "stage": "drain", "task": "Evict the node's GPU pods",
                              "msg": "1 GPU pod still on the node after 900 s"}
    assert got["unfinished"] == ["gpu-b"]
    assert [(h, got["nodes"][h]["state"]) for h in hosts] == [("gpu-a", "upgraded"), ("gpu-b", "failed"), ("gpu-c", "not_started")]
    assert got["nodes"]["gpu-b"]["msg"] == (
        "failed at drain (Evict the node's GPU pods): 1 GPU pod still on the node after 900 s; left cordoned")
    assert got["nodes"]["gpu-b"]["error"] == "1 GPU pod still on the node after 900 s"
    assert got["nodes"]["gpu-c"]["msg"] == "not started: the upgrade stopped at gpu-b: drain"
    assert got["lines"][:2] == [
        "Driver upgrade to 580: 3 GPU nodes in 3 batches (1 at a time): 1 upgraded, 1 failed, 1 not started",
        "The upgrade stopped at gpu-b (batch 2 of 3), stage drain (Evict the node's GPU pods): "
        "1 GPU pod still on the node after 900 s; not started: gpu-c",
    ]
    assert got["lines"][2:] == [
        "batch 1 of 3: gpu-a: upgraded: driver 580.95.05 loaded",
        "batch 2 of 3: gpu-b: failed at drain (Evict the node's GPU pods): 1 GPU pod still on the node after 900 s; left cordoned",
        "batch 3 of 3: gpu-c: not started: the upgrade stopped at gpu-b: drain",
    ]


def test_the_node_of_the_next_batch_sees_the_stop_when_its_batch_starts():
    hosts = ["gpu-a", "gpu-b", "gpu-c"]
    results = {"gpu-a": failed("validation", "gpu-a: validation failed: nvidia-smi failed", task="Fail the node as validate_fail_on asks"),
               "gpu-b": planned(), "gpu-c": planned()}
    got = upgrade.progress(hosts, 1, results, reached="gpu-b")
    assert got["nodes"]["gpu-b"]["state"] == "not_started"
    assert got["nodes"]["gpu-b"]["msg"] == "not started: the upgrade stopped at gpu-a: validation"
    # and no stop before it: the node goes on
    got = upgrade.progress(hosts, 1, {"gpu-a": UPGRADED, "gpu-b": planned(), "gpu-c": planned()}, reached="gpu-b")
    assert got["stopped"] is None
    assert got["nodes"]["gpu-b"]["state"] == "planned"


def test_nodes_of_the_same_batch_go_on_and_later_batches_stop():
    hosts = ["gpu-a", "gpu-b", "gpu-c", "gpu-d", "gpu-e"]
    results = {"gpu-a": UPGRADED, "gpu-b": UPGRADED, "gpu-c": failed("node ready", "gpu_drain: node gpu-c did not come back within 900 s"),
               "gpu-d": planned(), "gpu-e": UP_TO_DATE}
    got = upgrade.progress(hosts, [1, 2], results)
    assert got["batches"] == [["gpu-a"], ["gpu-b", "gpu-c"], ["gpu-d", "gpu-e"]]
    states = dict((h, e["state"]) for h, e in got["nodes"].items())
    assert states == {"gpu-a": "upgraded", "gpu-b": "upgraded", "gpu-c": "failed", "gpu-d": "not_started", "gpu-e": "up_to_date"}
    assert got["counts"]["not_started"] == 1 and got["counts"]["up_to_date"] == 1
    assert got["stopped"]["host"] == "gpu-c" and got["stopped"]["batch"] == 2


def test_the_plan_stops_nothing():
    hosts = ["gpu-a", "gpu-b", "gpu-c"]
    results = {"gpu-a": planned(pods=["ml/train-0"]), "gpu-b": UP_TO_DATE, "gpu-c": planned(cluster=False)}
    got = upgrade.progress(hosts, 2, results, reached=1)
    assert got["stopped"] is None and got["unfinished"] == []
    assert [e["state"] for e in got["nodes"].values()] == ["planned", "up_to_date", "planned"]
    assert got["lines"] == [
        "Driver upgrade to 580: 3 GPU nodes in 2 batches (2 at a time): 2 to upgrade, 1 up to date",
        "batch 1 of 2: gpu-a: to upgrade (declared driver 580, loaded 570.86.15): cordon, evict 1 GPU pod (ml/train-0), "
        "install driver 580 and reboot if the driver needs it, wait until it is Ready and advertises 8 nvidia.com/gpu, validate, uncordon",
        "batch 1 of 2: gpu-b: up to date, left alone and not cordoned: driver 580.95.05 loaded (declared 580), validation ok",
        "batch 2 of 2: gpu-c: to upgrade (declared driver 580, loaded 570.86.15): "
        "install driver 580 and reboot if the driver needs it, validate",
    ]


@pytest.mark.parametrize("earlier, stage, msg", [
    (planned(state="running", stage="driver upgrade"), "driver upgrade",
     "did not finish the driver upgrade stage (unreachable, or the run was interrupted)"),
    (planned(), "not started", "did not run (unreachable, or it failed outside the upgrade's stages)"),
])
def test_a_node_of_an_earlier_batch_that_did_not_finish_stops_the_run(earlier, stage, msg):
    got = upgrade.progress(["gpu-a", "gpu-b"], 1, {"gpu-a": earlier, "gpu-b": planned()}, reached=2)
    assert got["stopped"]["host"] == "gpu-a" and got["stopped"]["stage"] == stage
    assert got["nodes"]["gpu-a"]["msg"] == msg and got["nodes"]["gpu-a"]["error"] == msg
    assert got["nodes"]["gpu-b"]["state"] == "not_started"
    assert got["unfinished"] == ["gpu-a"]


def test_nodes_that_had_nothing_to_do_or_no_plan_stop_nothing():
    hosts = ["gpu-a", "gpu-b", "gpu-c", "gpu-d"]
    results = {"gpu-a": UP_TO_DATE, "gpu-b": planned(state="not_applicable", action="skip", reason="preinstalled"), "gpu-c": None,
               "gpu-d": planned()}
    got = upgrade.progress(hosts, 1, results, reached="gpu-d")
    assert got["stopped"] is None
    assert got["nodes"]["gpu-c"] == {"batch": 3, "state": "unplanned", "stage": None, "task": "", "error": "",
                                     "msg": "not upgraded: it was not planned (unreachable, or it failed before the plan)"}
    assert got["nodes"]["gpu-d"]["state"] == "planned"


def test_check_mode_and_a_failed_cordon():
    results = {"gpu-a": planned(state="would_upgrade", stage=None), "gpu-b": failed("cordon", "gpu_drain: node gpu-b is not in the cluster",
                                                                                    task="Cordon the node"), "gpu-c": planned()}
    got = upgrade.progress(["gpu-a", "gpu-b", "gpu-c"], 1, results)
    assert got["lines"][3] == (
        "batch 2 of 3: gpu-b: failed at cordon (Cordon the node): gpu_drain: node gpu-b is not in the cluster; left as it is")
    assert got["lines"][2].startswith("batch 1 of 3: gpu-a: would be upgraded (check mode): cordon, evict 0 GPU pods, install driver 580")
    assert got["counts"]["would_upgrade"] == 1


# --- the steps, on their own ----------------------------------------------------------------------


def test_the_validations_reasons_for_an_upgrade():
    checks = [{"name": "driver", "status": "ok"}, {"name": "driver_version", "status": "drift", "msg": "declared driver 580, loaded 570.86.15"},
              {"name": "driver_installed", "status": "skipped"}]
    validation = {"status": "failed", "checks": checks, "failed": ["declared driver 580, loaded 570.86.15", "nvidia-smi failed"]}
    assert upgrade._validation_reasons(validation) == [  # pylint: disable=protected-access
        "declared driver 580, loaded 570.86.15", "validation failed: nvidia-smi failed"]
    assert upgrade._validation_reasons({}) == ["not validated"]  # pylint: disable=protected-access


def test_the_nodes_reasons_for_an_upgrade():
    expect = {"resource": "nvidia.com/gpu", "count": 8, "mig": False}
    ready = {"ready": True, "allocatable": {"nvidia.com/gpu": "8"}, "cordoned_by": None}
    assert upgrade._node_reasons("gpu-a", ready, expect) == []  # pylint: disable=protected-access
    assert upgrade._node_reasons("gpu-a", {}, expect) == ["node gpu-a was not read in the cluster"]  # pylint: disable=protected-access
    assert upgrade._node_reasons("gpu-a", dict(ready, ready=False, allocatable={}, cordoned_by="x"), expect) == [  # pylint: disable=protected-access
        "node gpu-a is not Ready (unknown)", "node gpu-a advertises 0 nvidia.com/gpu, expected 8",
        "node gpu-a is still cordoned by an earlier upgrade (x)"]


@pytest.mark.parametrize("state,ran,unfinished,msg", [
    ("failed", True, True, "failed at drain (Evict): 1 pod left; left cordoned"),
    ("running", False, True, "did not finish the drain stage (unreachable, or the run was interrupted)"),
    ("planned", False, False, "to upgrade"),
    ("planned", True, True, "did not run (unreachable, or it failed outside the upgrade's stages)"),
    ("upgraded", True, False, ""),
])
def test_a_nodes_entry_and_whether_it_finished(state, ran, unfinished, msg):
    result = {"state": state, "stage": "drain", "task": "Evict", "msg": "1 pod left"}
    entry = upgrade._node_entry(1, result, None)  # pylint: disable=protected-access
    assert upgrade._did_not_finish(entry, ran) is unfinished  # pylint: disable=protected-access
    assert entry["msg"] == msg
    assert entry["error"] == ("" if not unfinished else "1 pod left" if state == "failed" else msg)


def test_a_node_after_the_stop_is_not_started():
    stop = {"host": "gpu-a", "stage": "drain"}
    entry = upgrade._node_entry(2, {"state": "planned"}, stop)  # pylint: disable=protected-access
    assert (entry["state"], entry["msg"]) == ("not_started", "not started: the upgrade stopped at gpu-a: drain")
