"""The fleet report for machines (JUnit XML, Prometheus' text format), the capped terminal summary,
and what a row says of the run: the layers it changed, held packages, the role's flavour, the fixes."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import pytest
import yaml

from ansible.template import trust_as_template

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import fleet as R
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import fixes, junit, prometheus, text
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.filter import fleets as F
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.plugin_utils.report import example_fleet as T
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.plugin_utils.report.example_fleet import fleet

DRIVER = {"changed": True, "method": "package", "backend": "apt-debian", "flavor": "proprietary",
          "packages": {"nvidia-driver": "535.309.01-1"}, "msg": "NVIDIA driver 535.309.01 (proprietary) installed and pinned"}


def test_junit_has_one_suite_per_node_and_one_case_per_check():
    report = T.example_report()
    root = ET.fromstring(junit.render_junit(report))
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [r["host"] for r in report["nodes"]]
    l40s = [s for s in suites if s.get("name") == "gpu-l40s-01"][0]
    assert [c.get("name") for c in l40s.findall("testcase")] == [
        "status", "kernel_next_boot", "driver_libraries", "nvml_reload", "isolation", "runtime_drift"]
    assert l40s.find("testcase[@name='status']/failure").get("type") == "drift"
    assert "fix: move the node to the declared driver 580" in l40s.find("testcase[@name='status']/failure").text
    assert int(root.get("tests")) == sum(int(s.get("tests")) for s in suites)
    assert [s for s in suites if s.get("name") == "gpu-down-01"][0].find("testcase/skipped") is not None


def test_junit_escapes_what_comes_from_a_node():
    hv = {'n"<&\x1b': {"gpufleet_nvidia_validation": {"status": "failed", "gpu_count": 1, "failed": ["<b>&\x07"], "checks": []}}}
    root = ET.fromstring(junit.render_junit(R.build_report(['n"<&\x1b'], hv)))
    assert root.find("testsuite").get("name") == 'n"<&' and root.find(".//failure").get("message") == "<b>&"


def test_prometheus_text_follows_the_format():
    page = prometheus.render_prometheus(fleet(8))
    names = [line.split()[2] for line in page.splitlines() if line.startswith("# TYPE")]
    assert len(names) == len(set(names)) and "gpufleet_node_status" in names and "gpufleet_node_packages_held" in names
    assert 'gpufleet_node_status{node="gpu-l40s-01",status="drift"} 1' in page
    assert 'gpufleet_run_duration_seconds 754.2' in page
    assert prometheus.escape_label('a\\b"c\nd') == 'a\\\\b\\"c\\nd'
    assert "gpufleet_run_in_progress 0" in page
    running = prometheus.render_prometheus(R.build_report([], {}, run={"state": "running"}))
    assert "gpufleet_run_in_progress 1" in running and "gpufleet_node_status" not in running


def test_prometheus_text_parses_with_prometheus_client():
    parser = pytest.importorskip("prometheus_client.parser", reason="prometheus_client is not installed (requirements.txt)")
    hv = {'n"\\\n': {"gpufleet_nvidia_validation": {"status": "ok", "gpu_count": 1, "checks": []}}}
    families = dict((f.name, f) for f in parser.text_string_to_metric_families(prometheus.render_prometheus(R.build_report(['n"\\\n'], hv))))
    assert [s.labels["node"] for s in families["gpufleet_node_gpus"].samples] == ['n"\\\n']
    assert len(list(parser.text_string_to_metric_families(prometheus.render_prometheus(fleet(1000))))) >= 5


def test_the_terminal_summary_is_capped_and_the_file_has_everything():
    report = fleet(1000)
    summary = text.render_summary(report, limit=20, path="/r/gpufleet-report.txt")
    bad = [r for r in report["nodes"] if r["status"] in ("failed", "drift", "not_validated")]
    assert "... and %d more nodes not ok" % (len(bad) - 20) in summary and summary.endswith("The whole report: /r/gpufleet-report.txt\n")
    assert len(summary) < 12000 and len(text.render_text(report)) > 1000000
    assert summary.count("\n  FAILED ") == 20 and "\n  fix         fix what stopped the run (above)" in summary
    assert ("FAILED gpu-h100-01: the run stopped at driver upgrade: Drain the node / pods of PodDisruptionBudget "
            "default/llm-serving cannot be evicted fix fix what stopped the run") in " ".join(summary.split())


def test_a_row_says_what_the_run_changed_and_what_is_held():
    hv = {"n": {"nvidia_driver_version": "535", "nvidia_driver_result": DRIVER,
                "container_toolkit_result": {"changed": False, "packages": {"nvidia-container-toolkit": "1.19.1-1"},
                                             "held": [], "runtime": {"changed": True, "changed_files": ["/etc/containerd/config.toml"]}}}}
    row = R.build_report(["n"], hv)["nodes"][0]
    assert row["changed"] == "driver, runtime"
    assert row["layers"]["driver"]["held"] == "held" and row["layers"]["toolkit"]["held"] == "not held: nvidia-container-toolkit"
    # the flavour the role installed, where the facts could not read it (no module loaded yet)
    assert (row["driver"]["flavor"], row["driver"]["flavor_why"]) == ("proprietary", None)
    locked = R.build_report(["n"], {"n": {"nvidia_driver_result": dict(DRIVER, backend="dnf")}})["nodes"][0]
    assert locked["layers"]["driver"]["held"] == "locked"
    assert R.build_report(["n"], {"n": {}})["nodes"][0]["changed"] is None


def _role_task(path, name):
    with open(os.path.join(T.ROOT, "roles", "container_toolkit", "tasks", path)) as handle:
        return next(task for task in yaml.safe_load(handle) if task.get("name") == name)


def _rendered(task, variables):
    """The value the task's set_fact gives container_toolkit_result, with ``variables`` and the task's vars."""
    variables = dict(variables, **F._trusted(task.get("vars") or {}))  # pylint: disable=protected-access
    value = F._trusted(task["ansible.builtin.set_fact"]["container_toolkit_result"])  # pylint: disable=protected-access
    return F._templar(variables).template(value)  # pylint: disable=protected-access


def test_an_el_row_says_the_toolkit_is_locked():
    """The container_toolkit role's record on EL (setup-RedHat.yml, then toolkit.yml) as the report
    reads it: the packages dnf versionlock locked make the toolkit "locked", as the driver's."""
    skipped, unchanged = {"skipped": True, "changed": False}, {"changed": False}
    with open(os.path.join(T.ROOT, "roles", "container_toolkit", "vars", "main.yml")) as handle:
        packages = yaml.safe_load(handle)["__container_toolkit_packages"]
    setup = {
        "__container_toolkit_repo": unchanged, "__container_toolkit_install": unchanged,
        "__container_toolkit_versionlock_plugin": unchanged, "__container_toolkit_deps": unchanged,
        "__container_toolkit_versionlock": {"changed": False, "stdout": ""},
        "__container_toolkit_packages": packages, "container_toolkit_runtime": "containerd",
        "__container_toolkit_runtime_result": {"changed": False, "changed_files": []},
    }
    recorded = _rendered(_role_task("setup-RedHat.yml", "Record what the toolkit layer changed"), setup)
    # rpm -q --qf '%{NAME} %{VERSION}-%{RELEASE}\n' on the lab's EL 9 stand-in node, the four and one
    # that is not installed (2026-12-04)
    rpm = ["nvidia-container-toolkit 1.20.0-1", "nvidia-container-toolkit-base 1.20.0-1",
           "libnvidia-container-tools 1.20.0-1", "libnvidia-container1 1.20.0-1", "package nvidia-foo is not installed"]
    final = {
        "container_toolkit_result": recorded, "__container_toolkit_os_family": "RedHat",
        "__container_toolkit_packages": packages, "__container_toolkit_rpm_versions": {"stdout_lines": rpm},
        "__container_toolkit_config": {"changed": False, "cdi": {"method": "module"}},
        "__container_toolkit_cdi_path": skipped, "__container_toolkit_cdi_service": skipped,
        "__container_toolkit_cdi_spec": skipped, "__container_toolkit_cdi_removed": skipped,
        "__container_toolkit_pyyaml": skipped, "__container_toolkit_dev_char": unchanged,
    }
    result = _rendered(_role_task("toolkit.yml", "Record what the toolkit layer changed"), final)
    assert result["packages"] == {name: "1.20.0-1" for name in packages}
    row = R.build_report(["el"], {"el": {"nvidia_driver_result": dict(DRIVER, backend="dnf"),
                                         "container_toolkit_result": result}})["nodes"][0]
    assert (row["layers"]["driver"]["held"], row["layers"]["toolkit"]["held"]) == ("locked", "locked")
    assert "  packages    driver locked; toolkit locked\n" in text.render_text(R.build_report(["el"], {"el": {
        "nvidia_driver_result": dict(DRIVER, backend="dnf"), "container_toolkit_result": result}}))
    # not locked (container_toolkit_hold false, or check mode): the versionlock task skipped
    unlocked = _rendered(_role_task("setup-RedHat.yml", "Record what the toolkit layer changed"),
                         dict(setup, __container_toolkit_versionlock=skipped))
    final["container_toolkit_result"] = unlocked
    result = _rendered(_role_task("toolkit.yml", "Record what the toolkit layer changed"), final)
    row = R.build_report(["el"], {"el": {"container_toolkit_result": result}})["nodes"][0]
    assert row["layers"]["toolkit"]["held"] == "not locked: " + ", ".join(sorted(packages))


def test_every_state_that_is_not_ok_has_a_fix():
    report = T.example_report()
    for row in report["nodes"]:
        assert bool(row["fix"]) == (row["status"] not in ("ok", "no_gpu")) or row["security"]["findings"], row["host"]
    drift = T.row(report, "gpu-l40s-01")["fix"][0]
    assert drift.startswith("move the node to the declared driver 580 (it has 550.163.01): ansible-playbook playbooks/upgrade.yml "
                            "--limit gpu-l40s-01")
    assert "ansible gpu-down-01 -m ansible.builtin.ping" in T.row(report, "gpu-down-01")["fix"][0]


def test_the_run_says_its_collection_version_and_duration():
    report = fleet(8)
    assert "gpufleet.nvidia 0.1.0 | run took 12 min 34 s" in " | ".join(R.meta_lines(report, report["run"]))
    assert [R.duration_text(s) for s in (42, 185, 3725)] == ["42 s", "3 min 05 s", "1 h 02 min"]


def _report_block_vars():
    with open(os.path.join(T.ROOT, "roles", "report", "tasks", "main.yml")) as handle:
        return yaml.safe_load(handle)[0]["vars"]


@pytest.mark.parametrize("inventory, groups, localhost, expected", [
    (["localhost"], {}, {"gpufleet_nvidia_validation": {"status": "ok"}}, ["localhost"]),  # -i localhost, on a GPU machine
    (["localhost"], {}, {"ansible_facts": {"gpufleet_nvidia": {"gpu_count": 1}}}, ["localhost"]),  # read, not validated
    (["gpu-1", "localhost"], {"gpu_nodes": ["gpu-1", "localhost"]}, {}, ["gpu-1", "localhost"]),  # declared a GPU node
    (["gpu-1", "localhost"], {"gpu_nodes": ["gpu-1"]}, {}, ["gpu-1"]),  # the control host, listed for the report play
])
def test_every_gpu_node_is_a_node_whatever_its_name_and_the_control_host_never(inventory, groups, localhost, expected):
    block = _report_block_vars()
    variables = {"__report_inventory": inventory, "groups": dict(groups, all=inventory),
                 "hostvars": {"localhost": localhost}}
    templar = F._templar(variables)  # pylint: disable=protected-access
    variables["__report_localhost_is_node"] = templar.template(trust_as_template(block["__report_localhost_is_node"]))
    assert F._templar(variables).template(trust_as_template(block["__report_hosts"])) == expected  # pylint: disable=protected-access


def test_a_drifted_preinstalled_driver_is_fixed_by_its_image_or_its_declaration():
    driver = {"declared": "580", "installed": "570.172.08", "loaded": "570.172.08", "source": "preinstalled"}
    (fix,) = fixes._state_fixes({"status": "drift", "failed": [], "driver": driver, "gpus": {}}, "n")  # pylint: disable=protected-access
    assert fix.startswith("the node's image brings driver 570.172.08, not the declared 580: declare what it runs "
                          "(nvidia_driver_version: 570.172.08)")
    with open(os.path.join(T.ROOT, "roles", "nvidia_driver", "tasks", "main.yml")) as handle:
        role = handle.read()
    assert "Fix: declare what the node runs (nvidia_driver_version: {{ nvidia_driver_result.version }})" in " ".join(role.split())
