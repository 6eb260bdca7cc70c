"""The produced containerd configs, loaded by real containerd binaries (``config dump``).

containerd 1.6 comes from Debian 12 (``apt-get install containerd``); 1.7 and 2.1 from the
Debian 13 / sid packages, extracted into ``.cache/containerd/<version>/`` (see
tests/unit/fixtures/runtime-configs/README.md). A binary that is not there skips its
tests, with the reason shown by ``pytest -ra``.

``containerd config dump`` prints the configuration containerd would run with, after
merging the drop-in: the handler must be under the CRI table with its BinaryName, and
the default runtime (``runc``, or ``nvidia`` when made the default) must be defined, which
is what containerd 1.6 / 1.7 lack with nvidia-ctk's drop-in on Debian's file.
"""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError

from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import containerd as ctd, containerd_config
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime.config_check import dump_problems
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.runtime.configs import (
    FIXTURES,
    WANTED_BINARIES,
    binary_param,
    containerd_dump,
    fixture_text,
    toml_plain,
)

MAIN = "/etc/containerd/config.toml"
GLOB = "/etc/containerd/conf.d/*.toml"
BINARY = "/usr/bin/nvidia-container-runtime"

#: the inputs (None: no file); the version 3 one is loaded by containerd 2.x only
CORPUS = [
    "containerd-1.6.20-default.toml",
    "containerd-1.7.24-default.toml",
    "containerd-2.1.9-default.toml",
    "debian-containerd-etc-config.toml",
    "docker-containerd.io-config.toml",
    "kubeadm-containerd-1.7-commented.toml",
    None,
]
OPTION_SETS = [{}, {"set_as_default": True, "enable_cdi": True, "enable_cri": True}]


def _cases():
    """(binary, fixture) pairs: every fixture with every binary that can hold its version."""
    cases = []
    for minor in WANTED_BINARIES:
        binary = binary_param(minor)
        for name in CORPUS:
            if name == "containerd-2.1.9-default.toml" and minor.startswith("1."):
                continue  # a version 3 file is for containerd 2.x
            cases.append(
                pytest.param(
                    binary.values[0], name, id="%s-%s" % (binary.id, (name or "nofile").replace(".toml", "")),
                    marks=binary.marks,
                )
            )
    return cases


def _cri_of(dump: dict):
    version = dump.get("version", 1)
    return dump["plugins"]["io.containerd.grpc.v1.cri" if version == 2 else "io.containerd.cri.v1.runtime"]


@pytest.mark.parametrize("options", OPTION_SETS, ids=["plain", "default-cdi-cri"])
@pytest.mark.parametrize("mode", ["dropin", "inplace"])
@pytest.mark.parametrize("binary, name", _cases())
def test_containerd_loads_the_result(binary, name, mode, options, tmp_path):
    from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.runtime.configs import (
        _binary_version,
    )

    version = _binary_version(binary)
    original = fixture_text(name) if name else None
    p = ctd.plan_containerd(
        MAIN, original, None, containerd_config.ContainerdOptions(mode=mode, containerd_version=version, **options)
    )
    main = p.file(MAIN).after
    dropin = p.file("/etc/containerd/conf.d/99-nvidia.toml").after
    out = containerd_dump(binary, tmp_path, main, dropin, import_glob=GLOB)
    dump = toml_plain(out)
    if name == "docker-containerd.io-config.toml" and not options:
        # CRI stays disabled (warned): containerd 1.x then shows no CRI configuration.
        assert any("CRI plugin is disabled" in w for w in p.warnings)
        assert "io.containerd.grpc.v1.cri" in dump["disabled_plugins"]
        return
    assert dump_problems(out, "nvidia", "present") == []
    containerd = _cri_of(dump)["containerd"]
    runtimes = containerd["runtimes"]
    assert runtimes["nvidia"]["runtime_type"] == "io.containerd.runc.v2"
    assert runtimes["nvidia"]["options"]["BinaryName"] == BINARY
    assert "runc" in runtimes
    assert containerd["default_runtime_name"] == ("nvidia" if options else "runc")
    if options and version.startswith("1.6."):
        # containerd 1.6's CRI plugin has no CDI: the key is dropped, and the module says so.
        assert "enable_cdi" not in _cri_of(dump)
        assert any("ignores enable_cdi" in w for w in p.warnings)
    elif options:
        assert _cri_of(dump)["enable_cdi"] is True
    if name == "kubeadm-containerd-1.7-commented.toml":
        assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True


@pytest.mark.parametrize("binary", [binary_param(v) for v in ("1.6", "1.7")])
def test_nvidia_ctk_dropin_loses_runc_and_ours_does_not(binary, tmp_path):
    """The defect, seen by containerd itself: with nvidia-ctk 1.20.0's drop-in on Debian's
    file, containerd 1.6 / 1.7 end up with ``nvidia`` only while the default is ``runc``."""
    case = FIXTURES + "/nvidia-ctk-1.20.0/containerd16-debian-etc--dropin/"
    with open(case + "output.toml") as main, open(case + "dropin-99-nvidia.toml") as dropin:
        theirs = containerd_dump(binary, tmp_path, main.read(), dropin.read(), import_glob=GLOB)
    assert list(_cri_of(toml_plain(theirs))["containerd"]["runtimes"]) == ["nvidia"]
    assert any("default_runtime_name = 'runc'" in p for p in dump_problems(theirs, "nvidia", "present"))

    p = ctd.plan_containerd(MAIN, fixture_text("debian-containerd-etc-config.toml"), None, containerd_config.ContainerdOptions())
    ours = containerd_dump(
        binary, tmp_path, p.file(MAIN).after, p.file("/etc/containerd/conf.d/99-nvidia.toml").after, import_glob=GLOB
    )
    assert dump_problems(ours, "nvidia", "present") == []
    assert sorted(_cri_of(toml_plain(ours))["containerd"]["runtimes"]) == ["nvidia", "runc"]


@pytest.mark.parametrize("binary", [binary_param("1.7")])
def test_containerd_17_refuses_a_version_3_dropin(binary, tmp_path):
    """Why the drop-in always takes the main file's version (golden README)."""
    import subprocess

    main = tmp_path / "config.toml"
    dropin = tmp_path / "99.toml"
    main.write_text('version = 2\nimports = ["%s"]\n' % dropin)
    dropin.write_text('version = 3\n[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]\n  runtime_type = "io.containerd.runc.v2"\n')
    proc = subprocess.run([binary, "--config", str(main), "config", "dump"], capture_output=True, text=True, check=False)
    assert proc.returncode != 0
    assert "unsupported config version `3`" in proc.stderr


@pytest.mark.parametrize("binary", [binary_param(v) for v in WANTED_BINARIES])
def test_an_earlier_dropin_survives_the_nvidia_dropin(binary, tmp_path):
    """containerd < 2.1 replaces the CRI table by the last import's; the nvidia drop-in
    repeats what 50-registry.toml set, so the registry setting is still in force."""
    import subprocess

    from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.runtime.configs import (
        _binary_version,
    )

    confd = tmp_path / "conf.d"
    confd.mkdir()
    site = 'version = 2\n[plugins."io.containerd.grpc.v1.cri".registry]\n  config_path = "/etc/containerd/certs.d"\n'
    (confd / "50-registry.toml").write_text(site)
    opts = containerd_config.ContainerdOptions(
        containerd_version=_binary_version(binary),
        dropin_path=str(confd / "99-nvidia.toml"),
        other_dropins=[str(confd / "50-registry.toml")],
    )
    p = ctd.plan_containerd(
        str(tmp_path / "config.toml"), fixture_text("debian-containerd-etc-config.toml"), None, opts,
        others=[(str(confd / "50-registry.toml"), site)],
    )
    for change in p.files:
        with open(change.path, "w") as handle:
            handle.write(change.after)
    out = subprocess.run(
        [binary, "--config", str(tmp_path / "config.toml"), "config", "dump"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    dump = toml_plain(out)
    cri = _cri_of(dump)
    assert dump_problems(out, "nvidia", "present") == []
    if dump["version"] == 2:
        assert cri["registry"]["config_path"] == "/etc/containerd/certs.d"
    else:  # containerd 2.x moved registry to the images plugin
        assert dump["plugins"]["io.containerd.cri.v1.images"]["registry"]["config_path"] == "/etc/containerd/certs.d"


SITE_V2 = 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "registry.example.com/pause:3.9"\n'


def _real_node(tmp_path, main_text, files=()):
    """A node whose containerd files lie under ``tmp_path`` (absolute paths), its commands run for real."""
    from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host import Host, subprocess_runner
    from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.common.fakes import FakeModule

    (tmp_path / "conf.d").mkdir()
    (tmp_path / "work").mkdir()
    for name, text in files:
        (tmp_path / name).write_text(text)
    (tmp_path / "config.toml").write_text(main_text.replace("@", str(tmp_path)))
    return Host("/", runner=subprocess_runner("/"), module=FakeModule(tmp_path / "work"))


@pytest.mark.parametrize("binary", [binary_param(v) for v in WANTED_BINARIES if v.startswith("2.")])
@pytest.mark.parametrize("mode", ["dropin", "inplace"])
def test_an_effective_setting_outside_the_handler_that_would_change_is_a_refusal(binary, tmp_path, mode):
    """containerd 2.1: a version 3 main file imports a version 2 file that sets sandbox_image; the drop-in
    (a version 3 CRI table) set pinned_images.sandbox back to containerd's default. The dumps of before
    and after are compared: a difference outside the handler is refused, nothing written."""
    from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import config as rc

    host = _real_node(tmp_path, 'version = 3\nimports = ["@/site.toml"]\n', [("site.toml", SITE_V2)])
    before = {p.name: p.read_text() for p in tmp_path.iterdir() if p.is_file()}
    params = {"runtime": "containerd", "config_path": str(tmp_path / "config.toml"), "config_mode": mode,
              "dropin_path": str(tmp_path / "conf.d" / "99-nvidia.toml"), "containerd_binary": binary}
    try:
        result = rc.configure(params, host)
    except GpuFleetError as error:
        assert "would change settings outside the nvidia runtime" in error.msg and "pinned_images.sandbox" in error.msg
        assert {p.name: p.read_text() for p in tmp_path.iterdir() if p.is_file()} == before
        assert not (tmp_path / "conf.d" / "99-nvidia.toml").exists()
        return
    dump = toml_plain(containerd_dump(binary, tmp_path / "work", (tmp_path / "config.toml").read_text()))
    assert dump["plugins"]["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"] == "registry.example.com/pause:3.9"
    assert result["validation"]["ran"]


@pytest.mark.parametrize("binary", [binary_param(v) for v in WANTED_BINARIES if v.startswith("1.")])
def test_a_table_version_1_ignored_that_the_written_version_turns_on_is_a_refusal(binary, tmp_path):
    """Without version, containerd 1.x reads the file as version 1 and ignores a table under a version 2
    plugin name; the version the module writes turns it on (found by the property suite's long profile)."""
    from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import config as rc

    main = ('[plugins."io.containerd.grpc.v1.cri".containerd]\ndefault_runtime_name = "crun"\n'
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.crun]\nruntime_type = "io.containerd.runc.v2"\n')
    host = _real_node(tmp_path, main)
    params = {"runtime": "containerd", "config_path": str(tmp_path / "config.toml"),
              "dropin_path": str(tmp_path / "conf.d" / "99-nvidia.toml"), "containerd_binary": binary}
    with pytest.raises(GpuFleetError) as error:
        rc.configure(params, host)
    assert "[plugins.\"io.containerd.grpc.v1.cri\"] is ignored today" in error.value.msg
    dump = toml_plain(containerd_dump(binary, tmp_path / "work", main))  # the real binary: ignored today, indeed
    assert dump["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["default_runtime_name"] == "runc"
    assert (tmp_path / "config.toml").read_text() == main and not (tmp_path / "conf.d" / "99-nvidia.toml").exists()
