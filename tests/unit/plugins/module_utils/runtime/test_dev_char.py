"""Tests of runtime/dev_char.py: which nodes lose GPUs on daemon-reload, and the toolkit's fix.

The containerd drop-ins are nvidia-ctk 1.20.0's own output on containerd 1.6 and 2.1 defaults
(/work/shared/reference/golden/nvidia-ctk/*/dropin-99-nvidia.toml, SystemdCgroup = false as
containerd's default has it), and the same with SystemdCgroup = true (derived here, as a kubeadm
node has it); the tests that read them skip visibly without the captures. Device nodes are plain
files with their numbers given by a table, since a test cannot create character devices.
"""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host import Host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import dev_char as dc
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.common.fakes import FakeModule

GOLDEN = os.path.join(os.path.dirname(os.path.dirname(__file__)), "..", "..", "..", "..", "..", "shared", "reference", "golden", "nvidia-ctk")
NUMBERS = {"nvidia0": (195, 0), "nvidia1": (195, 1), "nvidiactl": (195, 255), "nvidia-uvm": (507, 0), "nvidia-uvm-tools": (507, 1)}
LEGACY = '[nvidia-container-runtime]\nmode = "legacy"\n'


def numbers(local):
    return NUMBERS.get(os.path.basename(local)) if os.path.isfile(local) else None


def golden_dropin(case):
    path = os.path.join(GOLDEN, case, "dropin-99-nvidia.toml")
    if not os.path.isfile(path):
        pytest.skip("the nvidia-ctk capture %s is not beside this checkout" % path)
    with open(path, encoding="utf-8") as handle:
        return handle.read()


class Node(object):
    """A host tree under tmp_path whose nvidia-ctk (the runner) creates the links as the real one does."""

    def __init__(self, tmp_path, files=None, nodes=("nvidia0", "nvidiactl", "nvidia-uvm"), ctk_works=True):
        self.root = str(tmp_path / "host")
        self.ran = []
        self.ctk_works = ctk_works
        for path, text in dict({"/usr/bin/nvidia-ctk": "#!/bin/sh\n"}, **(files or {})).items():
            self.write(path, text)
        os.chmod(self.root + "/usr/bin/nvidia-ctk", 0o755)
        for name in nodes:
            self.write("/dev/" + name, "")
        os.makedirs(str(tmp_path / "tmp"))
        self.host = Host(self.root, runner=self.run, kernel_root=self.root, dev_root=self.root, module=FakeModule(tmp_path / "tmp"))

    def write(self, path, text):
        os.makedirs(os.path.dirname(self.root + path), exist_ok=True)
        with open(self.root + path, "w", encoding="utf-8") as handle:
            handle.write(text)

    def run(self, argv, env=None):
        self.ran.append(argv)
        if self.ctk_works:
            os.makedirs(self.root + "/dev/char", exist_ok=True)
            for link, node in dc.wanted_links(self.host, numbers).items():
                if not os.path.lexists(self.root + link):
                    os.symlink(node, self.root + link)
        return 0, "", ""


def params(**values):
    base = {"state": "auto", "runtime": "containerd", "runtime_name": "nvidia", "toolkit_config": dc.toolkit_config.CONFIG_PATH,
            "toolkit_version": "1.20.0-1", "rule_path": dc.RULE_PATH, "nvidia_ctk_path": dc.NVIDIA_CTK}
    base.update(values)
    return base


# --- which nodes are exposed -------------------------------------------------------------------


@pytest.mark.parametrize("mode, version, effective", [
    ("auto", "1.17.8-1", "legacy"), ("auto", "1.18.0", "jit-cdi"), ("auto", "1.20.0-1", "jit-cdi"),
    ("legacy", "1.20.0-1", "legacy"), ("cdi", "1.17.8", "cdi"), ("cdi", None, "cdi")])
def test_effective_mode(mode, version, effective):
    assert dc.effective_mode(mode, version) == effective


@pytest.mark.parametrize("version, affected", [("1.20.0-1", False), ("1.17.8-1", True)])
def test_auto_mode_agrees_with_discovery(version, affected):
    """The toolkit layer and discovery.day2 (preflight, validation) apply one rule to auto mode."""
    mode = dc.effective_mode("auto", version)
    assert mode == dc.day2.effective_mode("auto", version)
    assert dc.assess("containerd", ("systemd", "SystemdCgroup = true"), mode)["affected"] is affected
    assert dc.day2.reload_exposed("containerd", "systemd", mode) is affected


def test_auto_mode_needs_a_toolkit_version():
    with pytest.raises(GpuFleetError) as error:
        dc.effective_mode("auto", "latest")
    assert "toolkit_version 'latest' is not a toolkit version" in error.value.msg


@pytest.mark.parametrize("runtime, cgroup, mode, affected", [
    ("containerd", "systemd", "legacy", True),
    ("containerd", "systemd", "jit-cdi", False),
    ("containerd", "systemd", "cdi", False),
    ("containerd", "cgroupfs", "legacy", False),
    ("crio", "systemd", "legacy", True),
    ("docker", "systemd", "jit-cdi", True),  # docker run --gpus uses the legacy hook
    ("docker", "cgroupfs", "legacy", False),
])
def test_assess(runtime, cgroup, mode, affected):
    found = dc.assess(runtime, (cgroup, "somewhere"), mode)
    assert found["affected"] is affected and found["reasons"]


@pytest.mark.parametrize("case", ["containerd16-default--dropin", "containerd21-default--dropin"])
def test_containerd_cgroup_of_nvidia_ctks_dropin(tmp_path, case):
    dropin = golden_dropin(case)
    node = Node(tmp_path, {"/etc/containerd/config.toml": "", "/etc/containerd/conf.d/99-nvidia.toml": dropin})
    assert dc.cgroup_driver(node.host, "containerd")[0] == "cgroupfs"
    node.write("/etc/containerd/conf.d/99-nvidia.toml", dropin.replace("SystemdCgroup = false", "SystemdCgroup = true"))
    driver, where = dc.cgroup_driver(node.host, "containerd")
    assert driver == "systemd" and where == "SystemdCgroup = true in /etc/containerd/conf.d/99-nvidia.toml (runtimes.nvidia)"


def test_containerd_without_the_nvidia_runtime_reads_the_default_runtime(tmp_path):
    main = ('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\ndefault_runtime_name = "runc"\n'
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\nSystemdCgroup = true\n')
    node = Node(tmp_path, {"/etc/containerd/config.toml": main})
    assert dc.cgroup_driver(node.host, "containerd")[0] == "systemd"
    node.write("/etc/containerd/config.toml", "version = 2\n")
    assert dc.cgroup_driver(node.host, "containerd") == ("cgroupfs", "no SystemdCgroup in the containerd configuration (containerd's default is false)")


def test_crio_and_docker_cgroup(tmp_path):
    node = Node(tmp_path)
    assert dc.cgroup_driver(node.host, "crio") == ("systemd", "CRI-O's default cgroup_manager")
    node.write("/etc/crio/crio.conf.d/10-site.conf", '[crio.runtime]\ncgroup_manager = "cgroupfs"\n')
    assert dc.cgroup_driver(node.host, "crio")[0] == "cgroupfs"
    assert dc.cgroup_driver(node.host, "docker") == ("cgroupfs", "Docker's default on cgroup v1")
    node.write("/sys/fs/cgroup/cgroup.controllers", "cpu memory\n")
    assert dc.cgroup_driver(node.host, "docker") == ("systemd", "Docker's default on cgroup v2")
    node.write("/etc/docker/daemon.json", '{"exec-opts": ["native.cgroupdriver=cgroupfs"]}')
    assert dc.cgroup_driver(node.host, "docker") == ("cgroupfs", "exec-opts in /etc/docker/daemon.json")


# --- the fix -----------------------------------------------------------------------------------

SYSTEMD_MAIN = ('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
                'BinaryName = "/usr/bin/nvidia-container-runtime"\nSystemdCgroup = true\n')


def exposed(tmp_path, **kwargs):
    return Node(tmp_path, {"/etc/containerd/config.toml": SYSTEMD_MAIN, dc.toolkit_config.CONFIG_PATH: LEGACY}, **kwargs)


def test_exposed_node_check_mode_changes_nothing(tmp_path):
    node = exposed(tmp_path)
    checked = dc.converge(node.host, params(), check_mode=True, want_diff=True, numbers=numbers)
    assert checked["changed"] and checked["needed"] and checked["rule_action"] == "create"
    assert checked["missing_links"] == ["/dev/char/195:0", "/dev/char/195:255", "/dev/char/507:0"]
    assert checked["commands"] == ["/usr/bin/nvidia-ctk system create-dev-char-symlinks --create-all"]
    assert node.ran == [] and not os.path.exists(node.root + dc.RULE_PATH) and not os.path.exists(node.root + "/dev/char")
    assert "/dev/char/195:0 -> /dev/nvidia0 (missing)" in checked["diff"][1]["before"]


def test_exposed_node_real_run_then_no_change(tmp_path):
    node = exposed(tmp_path)
    done = dc.converge(node.host, params(), numbers=numbers)
    assert done["changed"] and node.ran == [[dc.NVIDIA_CTK, "system", "create-dev-char-symlinks", "--create-all"]]
    with open(node.root + dc.RULE_PATH, encoding="utf-8") as handle:
        rule = handle.read()
    assert ('ACTION=="add", DEVPATH=="/bus/pci/drivers/nvidia", '
            'RUN+="/usr/bin/nvidia-ctk system create-dev-char-symlinks --create-all"\n') in rule
    again = dc.converge(node.host, params(), check_mode=True, numbers=numbers)
    assert not again["changed"] and again["missing_links"] == [] and again["commands"] == []
    assert not dc.converge(node.host, params(), numbers=numbers)["changed"] and len(node.ran) == 1


def test_a_relative_link_as_udev_writes_it_counts(tmp_path):
    node = exposed(tmp_path, nodes=("nvidiactl",))
    os.makedirs(node.root + "/dev/char")
    os.symlink("../nvidiactl", node.root + "/dev/char/195:255")
    assert dc.missing_links(node.host, dc.wanted_links(node.host, numbers)) == []


def test_a_node_that_is_not_exposed_is_left_alone(tmp_path):
    node = Node(tmp_path, {"/etc/containerd/config.toml": SYSTEMD_MAIN})  # toolkit 1.20, auto: JIT-CDI
    found = dc.converge(node.host, params(), numbers=numbers)
    assert not found["changed"] and not found["needed"] and found["links"] == {} and node.ran == []
    assert found["toolkit_mode"] == "jit-cdi" and "not needed" in found["msg"]
    assert not os.path.exists(node.root + dc.RULE_PATH)


def test_auto_removes_its_own_rule_where_no_longer_needed_but_not_the_sites(tmp_path):
    node = Node(tmp_path, {"/etc/containerd/config.toml": SYSTEMD_MAIN, dc.RULE_PATH: dc.rule_text()})
    removed = dc.converge(node.host, params(), numbers=numbers)
    assert removed["changed"] and removed["rule_action"] == "delete" and not os.path.exists(node.root + dc.RULE_PATH)
    node.write(dc.RULE_PATH, "# the site's own\n")
    kept = dc.converge(node.host, params(), numbers=numbers)
    assert not kept["changed"] and os.path.exists(node.root + dc.RULE_PATH)


def test_absent_removes_the_rule(tmp_path):
    node = exposed(tmp_path)
    dc.converge(node.host, params(), numbers=numbers)
    gone = dc.converge(node.host, params(state="absent"), numbers=numbers)
    assert gone["changed"] and gone["rule_action"] == "delete" and not os.path.exists(node.root + dc.RULE_PATH)


def test_without_nvidia_ctk_the_missing_links_are_refused_by_name(tmp_path):
    node = exposed(tmp_path)
    os.remove(node.root + "/usr/bin/nvidia-ctk")
    with pytest.raises(GpuFleetError) as error:
        dc.converge(node.host, params(), numbers=numbers)
    assert "/usr/bin/nvidia-ctk is not installed" in error.value.msg and "/dev/char/195:0" in error.value.msg


def test_links_still_missing_after_nvidia_ctk_fail(tmp_path):
    node = exposed(tmp_path, ctk_works=False)
    with pytest.raises(GpuFleetError) as error:
        dc.converge(node.host, params(), numbers=numbers)
    assert "create-dev-char-symlinks --create-all (rc 0) left /dev/char/195:0" in error.value.msg


def test_no_device_nodes_writes_the_rule_and_runs_nothing(tmp_path):
    node = exposed(tmp_path, nodes=())
    done = dc.converge(node.host, params(), numbers=numbers)
    assert done["changed"] and done["rule_action"] == "create" and done["links"] == {} and node.ran == []


# --- what reaches the udev rule (a root-run hook) -----------------------------------------------


@pytest.mark.parametrize("option, value", [
    ("nvidia_ctk_path", '/usr/bin/nvidia-ctk" RUN+="/bin/sh -c id'),
    ("nvidia_ctk_path", "/usr/bin/nvidia-ctk\nACTION==\"add\", RUN+=\"/tmp/x\""),
    ("nvidia_ctk_path", "/usr/bin/nvidia ctk"),
    ("nvidia_ctk_path", "/usr/bin/$kernel"),
    ("nvidia_ctk_path", "/usr/bin/%k"),
    ("nvidia_ctk_path", "/usr/bin/nvidia-ctk\\"),
    ("nvidia_ctk_path", "nvidia-ctk"),
    ("nvidia_ctk_path", "/usr/bin/../../tmp/x"),
    ("nvidia_ctk_path", "/"),  # a folder, not a program (found by the property suite)
    ("rule_path", "71-nvidia-dev-char.rules"),
    ("rule_path", "/etc/udev/rules.d/../../../tmp/71.rules"),
    ("rule_path", "/etc/udev/rules.d/71-nvidia-dev-char.rules\n"),
    ("rule_path", "/etc/udev/rules.d/71-nvidia-dev-char.conf"),
])
def test_a_value_that_would_change_the_rule_is_refused_before_anything_is_written(tmp_path, option, value):
    node = exposed(tmp_path)
    with pytest.raises(GpuFleetError) as error:
        dc.converge(node.host, params(**{option: value}), numbers=numbers)
    assert "dev_char_symlinks: %s %r is not" % (option, value) in error.value.msg
    assert node.ran == [] and not os.path.exists(node.root + dc.RULE_PATH) and not os.path.exists(node.root + "/tmp")


def test_the_command_is_one_nvidia_ctk_1_20_has():
    """The subcommand and flag the module and its udev rule run are in the recorded help of nvidia-ctk 1.20.0."""
    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "..", "..", "fixtures", "cdi", "nvidia-ctk", "system-create-dev-char-symlinks-help.txt")
    with open(path, encoding="utf-8") as handle:
        helped = handle.read()
    assert "system create-dev-char-symlinks - A utility to create symlinks" in helped and "--create-all " in helped
    assert 'RUN+="%s system create-dev-char-symlinks --create-all"' % dc.NVIDIA_CTK in dc.rule_text()
