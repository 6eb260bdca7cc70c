"""The lab of `make demo` (inventory/lab) agrees with what starts and prepares it: every node is
started by scripts/demo.sh from an image scripts/lab.sh picks by the node's name, and each EL node
(the stand-in, group_vars lab_el9) is given the stand-in repositories of its release."""

from __future__ import annotations

import os
import re

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAB = os.path.join(ROOT, "inventory", "lab")


def _read(*parts):
    with open(os.path.join(ROOT, *parts)) as handle:
        return handle.read()


def _groups():
    """``{group: [host, ...]}`` of the lab's leaf groups."""
    found = {}

    def walk(name, group):
        hosts = list((group or {}).get("hosts") or {})
        if hosts:
            found[name] = hosts
        for child, sub in ((group or {}).get("children") or {}).items():
            walk(child, sub)

    walk("all", yaml.safe_load(_read("inventory", "lab", "hosts.yml"))["all"])
    return found


def _group_vars(group):
    path = os.path.join(LAB, "group_vars", "%s.yml" % group)
    if not os.path.exists(path):
        return {}
    with open(path) as handle:
        return yaml.safe_load(handle) or {}


def test_the_lab_is_a_mixed_fleet_with_an_el_node():
    groups = _groups()
    hosts = [h for members in groups.values() for h in members]
    assert {"gpufleet-lab-debian12", "gpufleet-lab-debian13", "gpufleet-lab-el9"} <= set(hosts)
    assert any(_group_vars(g).get("lab_el_dist") for g in groups)


def test_demo_starts_every_node_from_an_image_lab_sh_knows():
    hosts = sorted(h for members in _groups().values() for h in members)
    (started,) = re.findall(r'scripts/lab\.sh" up ([^\n]+)', _read("scripts", "demo.sh"))
    assert sorted(started.split()) == hosts
    suffixes = re.findall(r"^\s+\*([a-z0-9]+)\) printf '%s:\1\\n' \"\$IMAGE_REPO\" ;;$", _read("scripts", "lab.sh"), re.M)
    assert set(suffixes) >= {"debian12", "debian13", "el9"}
    for host in hosts:
        assert any(host.endswith(s) for s in suffixes), host


def test_each_el_node_gets_the_stand_in_repositories_of_its_release():
    demo = _read("scripts", "demo.sh")
    for group, hosts in _groups().items():
        gv = _group_vars(group)
        dist = gv.get("lab_el_dist")
        if not dist:
            continue
        major = dist[len("el"):]
        assert all(h.endswith(dist) for h in hosts), (group, hosts)  # lab.sh picks the el image by name
        assert gv["nvidia_driver_cuda_repo_baseurl"] == "http://127.0.0.1:8088/compute/cuda/repos/rhel%s/x86_64" % major
        assert gv["container_toolkit_repo_url"] == "http://127.0.0.1:8088/stable/rpm/$basearch"
        assert gv["nvidia_driver_version"]
        assert "build-el-images.sh" in demo


def test_the_report_notes_say_the_el_node_is_a_stand_in():
    notes = " ".join(_group_vars("all")["gpufleet_report_notes"])
    assert "EL 9 node (gpufleet-lab-el9) is a STAND-IN" in notes
