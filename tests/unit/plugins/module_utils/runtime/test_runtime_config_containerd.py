"""Tests of module_utils/runtime/containerd.py over a corpus of real containerd configs.

The corpus (tests/unit/fixtures/runtime-configs/, origins in its README.md): the
``containerd config default`` of containerd 1.6.20, 1.7.24 and 2.1.9, Debian's shipped
``/etc/containerd/config.toml``, Docker's containerd.io config (``disabled_plugins =
["cri"]``, no version), a kubeadm-style commented config with ``SystemdCgroup = true``,
no file at all; k3s templates. The oracle: what nvidia-ctk 1.20.0 wrote for the same
inputs (``nvidia-ctk-1.20.0/``), where it is right, and a test named after each of its
defects where it is not.
"""

from __future__ import annotations

import copy
import difflib
import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import containerd as ctd, containerd_config, containerd_inplace, edit, managed
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import k3s as k3s_editor
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.runtime.configs import (
    FIXTURES,
    fixture_text,
    toml_plain,
)

MAIN = "/etc/containerd/config.toml"
DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"
GLOB = "/etc/containerd/conf.d/*.toml"
BINARY = "/usr/bin/nvidia-container-runtime"
V2 = "io.containerd.grpc.v1.cri"
V3 = "io.containerd.cri.v1.runtime"

#: fixture (None: no file), major version of the containerd found, config version, CRI table
CORPUS = [
    ("containerd-1.6.20-default.toml", 1, 2, V2),
    ("containerd-1.7.24-default.toml", 1, 2, V2),
    ("containerd-2.1.9-default.toml", 2, 3, V3),
    ("debian-containerd-etc-config.toml", 1, 2, V2),
    ("debian-containerd-etc-config.toml", 2, 2, V2),  # Debian's file under containerd 2.1
    ("docker-containerd.io-config.toml", 1, 2, V2),
    ("docker-containerd.io-config.toml", 2, 3, V3),
    ("kubeadm-containerd-1.7-commented.toml", 1, 2, V2),
    (None, 1, 2, V2),
    (None, 2, 3, V3),
    (None, None, 2, V2),  # no file, no containerd binary: version 2 (as nvidia-ctk)
]
OPTION_SETS = [
    {},
    {"set_as_default": True},
    {"enable_cdi": True},
    {"set_as_default": True, "enable_cdi": True, "enable_cri": True},
]
MODES = ["dropin", "inplace"]


def corpus_id(case):
    name, major, version, _want = case
    return "%s-ctd%s-v%s" % ((name or "nofile").replace(".toml", ""), major, version)


def source(name):
    return fixture_text(name) if name else None


def plan(main_text, dropin_text=None, **kw):
    kw.setdefault("mode", "dropin")
    return ctd.plan_containerd(MAIN, main_text, dropin_text, containerd_config.ContainerdOptions(**kw))


def outputs(p):
    return p.file(MAIN).after, p.file(DROPIN).after


def effective(main_text, dropin_text):
    """The config containerd < 2.1 sees: a drop-in's plugin tables replace the main file's."""
    config = toml_plain(main_text or "")
    if dropin_text is not None:
        dropin = toml_plain(dropin_text)
        for key, value in dropin.get("plugins", {}).items():
            config.setdefault("plugins", {})[key] = copy.deepcopy(value)
    return config


def runtimes_of(config, key):
    return config["plugins"][key]["containerd"]["runtimes"]


# --------------------------------------------------------------------------------------
# The corpus: present, again, absent
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("options", OPTION_SETS, ids=lambda o: "-".join(sorted(o)) or "plain")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CORPUS, ids=corpus_id)
def test_present_adds_the_handler_and_keeps_runc(case, mode, options):
    name, major, version, key = case
    original = source(name)
    p = plan(original, mode=mode, containerd_major=major, **options)
    main, dropin = outputs(p)
    assert p.changed
    assert p.facts["config_version"] == version
    assert p.facts["plugin_table"] == 'plugins."%s"' % key
    config = effective(main, dropin)
    assert config.get("version", 1) == version
    runtimes = runtimes_of(config, key)
    nvidia = runtimes["nvidia"]
    assert nvidia["runtime_type"] == "io.containerd.runc.v2"
    assert nvidia["options"]["BinaryName"] == BINARY
    # Beats nvidia-ctk: runc stays defined, so containerd 1.6 / 1.7 (which replace their
    # built-in runtimes by the file's) still have the default runtime.
    assert runtimes["runc"]["runtime_type"] == "io.containerd.runc.v2"
    default = config["plugins"][key].get("containerd", {}).get("default_runtime_name", "runc")
    assert default == ("nvidia" if options.get("set_as_default") else "runc")
    assert default in runtimes
    if options.get("enable_cdi"):
        assert config["plugins"][key]["enable_cdi"] is True
    if options.get("enable_cri"):
        assert not set(config.get("disabled_plugins", [])) & set(containerd_config.CRI_PLUGIN_NAMES)
    if mode == "dropin":
        assert dropin is not None
        assert GLOB in toml_plain(main)["imports"]
        assert toml_plain(dropin).get("version", 1) == toml_plain(main).get("version", 1)
    else:
        assert dropin is None


@pytest.mark.parametrize("options", OPTION_SETS, ids=lambda o: "-".join(sorted(o)) or "plain")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CORPUS, ids=corpus_id)
def test_second_run_changes_nothing_and_absent_gives_back_the_original(case, mode, options):
    name, major, _version, _want = case
    original = source(name)
    main, dropin = outputs(plan(original, mode=mode, containerd_major=major, **options))

    again = plan(main, dropin, mode=mode, containerd_major=major, **options)
    assert not again.changed, again.diff
    assert outputs(again) == (main, dropin)  # byte-identical

    gone = plan(main, dropin, mode=mode, state="absent", containerd_major=major)
    assert gone.changed
    assert outputs(gone) == (original, None)  # the original bytes (or no file)
    assert not gone.warnings

    nothing = plan(original, mode=mode, state="absent", containerd_major=major)
    assert not nothing.changed


def test_systemd_cgroup_is_copied_from_the_default_runtime():
    original = fixture_text("kubeadm-containerd-1.7-commented.toml")
    for mode in MODES:
        main, dropin = outputs(plan(original, mode=mode, containerd_major=1))
        nvidia = runtimes_of(effective(main, dropin), V2)["nvidia"]
        assert nvidia["options"]["SystemdCgroup"] is True
        assert nvidia["options"]["BinaryName"] == BINARY


def test_the_default_runtime_is_the_source_not_only_runc():
    original = fixture_text("containerd-1.6.20-default.toml").replace(
        'default_runtime_name = "runc"', 'default_runtime_name = "crun"'
    ).replace(
        '[plugins."io.containerd.grpc.v1.cri".containerd.untrusted_workload_runtime]',
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.crun]\n'
        '          runtime_type = "io.containerd.runc.v2"\n'
        '          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.crun.options]\n'
        '            BinaryName = "/usr/bin/crun"\n'
        '            SystemdCgroup = true\n'
        '      [plugins."io.containerd.grpc.v1.cri".containerd.untrusted_workload_runtime]',
    )
    p = plan(original, mode="inplace")
    assert p.facts["source_runtime"] == "crun"
    nvidia = runtimes_of(toml_plain(p.file(MAIN).after), V2)["nvidia"]
    assert nvidia["options"] == {"BinaryName": BINARY, "SystemdCgroup": True}
    # Made the default, a second run still copies crun (the default before the module).
    main = plan(original, mode="inplace", set_as_default=True).file(MAIN).after
    again = plan(main, mode="inplace", set_as_default=True)
    assert not again.changed and again.facts["source_runtime"] == "crun"


def test_a_non_runc_default_runtime_is_not_copied():
    original = 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n  default_runtime_name = "kata"\n' \
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]\n  runtime_type = "io.containerd.kata.v2"\n'
    p = plan(original, mode="inplace")
    assert p.facts["source_runtime"] is None
    nvidia = runtimes_of(toml_plain(p.file(MAIN).after), V2)["nvidia"]
    assert nvidia == {"runtime_type": "io.containerd.runc.v2", "options": {"BinaryName": BINARY}}


# --------------------------------------------------------------------------------------
# Against nvidia-ctk 1.20.0
# --------------------------------------------------------------------------------------

GOLDEN = os.path.join(FIXTURES, "nvidia-ctk-1.20.0")


def golden(case, name):
    with open(os.path.join(GOLDEN, case, name), encoding="utf-8") as handle:
        return handle.read()


@pytest.mark.parametrize(
    "case, fixture, options",
    [
        ("containerd16-default--dropin", "containerd-1.6.20-default.toml", {}),
        ("containerd16-default--dropin-set-as-default", "containerd-1.6.20-default.toml", {"set_as_default": True}),
        ("containerd21-default--dropin", "containerd-2.1.9-default.toml", {}),
    ],
)
def test_dropin_has_the_same_content_as_nvidia_ctk(case, fixture, options):
    """Where nvidia-ctk is right, the drop-in holds exactly the same keys and values."""
    main, dropin = outputs(plan(fixture_text(fixture), **options))
    assert toml_plain(dropin) == toml_plain(golden(case, "dropin-99-nvidia.toml"))
    assert toml_plain(main) == toml_plain(golden(case, "output.toml"))


def test_beats_nvidia_ctk_runc_kept_when_the_input_has_no_runc():
    """Defect: on Debian's shipped file nvidia-ctk's drop-in leaves containerd 1.6 / 1.7
    with only ``nvidia`` and CRI does not start (golden containerd-start-1.6.log)."""
    log = golden("containerd16-debian-etc--dropin", "containerd-start-1.6.log")
    assert "no corresponding runtime configured in `containerd.runtimes`" in log
    theirs = toml_plain(golden("containerd16-debian-etc--dropin", "dropin-99-nvidia.toml"))
    assert list(theirs["plugins"][V2]["containerd"]["runtimes"]) == ["nvidia"]

    main, dropin = outputs(plan(fixture_text("debian-containerd-etc-config.toml")))
    ours = toml_plain(dropin)
    assert ours["plugins"][V2]["containerd"]["runtimes"]["runc"] == {"runtime_type": "io.containerd.runc.v2"}
    # Otherwise the same, without the version-1 keys nvidia-ctk adds (containerd 2.1 warns
    # "Ignoring unknown key ... runtime_engine / runtime_root").
    expected = copy.deepcopy(theirs)
    nvidia = expected["plugins"][V2]["containerd"]["runtimes"]["nvidia"]
    for k in ("privileged_without_host_devices", "runtime_engine", "runtime_root"):
        nvidia.pop(k)
    ours["plugins"][V2]["containerd"]["runtimes"].pop("runc")
    assert ours == expected
    assert toml_plain(main) == toml_plain(golden("containerd16-debian-etc--dropin", "output.toml"))


def test_beats_nvidia_ctk_in_place_writes_the_runtime():
    """Defect: nvidia-ctk 1.20.0 with --drop-in-config="" writes no runtime for v2 / v3."""
    for fixture, key in (("containerd-1.6.20-default.toml", V2), ("containerd-2.1.9-default.toml", V3)):
        main, dropin = outputs(plan(fixture_text(fixture), mode="inplace"))
        assert dropin is None
        assert runtimes_of(toml_plain(main), key)["nvidia"]["options"]["BinaryName"] == BINARY


def test_beats_nvidia_ctk_main_file_keeps_comments_order_and_quotes():
    """Defect: nvidia-ctk re-serialises the main file (comments dropped, keys sorted,
    containerd 2's single quotes turned into double quotes)."""
    original = fixture_text("containerd-2.1.9-default.toml")
    theirs = golden("containerd21-default--dropin", "output.toml")
    assert theirs.splitlines()[:2] == ["disabled_plugins = []", 'imports = ["/etc/containerd/conf.d/*.toml"]']
    main, _dropin = outputs(plan(original))
    changed = [line for line in difflib.ndiff(original.splitlines(), main.splitlines()) if line[:1] in "+-"]
    assert changed == ["- imports = []", "+ imports = ['/etc/containerd/conf.d/*.toml']"]


@pytest.mark.parametrize("mode", MODES)
def test_comments_and_order_of_the_main_file_survive(mode):
    original = fixture_text("kubeadm-containerd-1.7-commented.toml")
    main, _dropin = outputs(plan(original, mode=mode, set_as_default=True, enable_cdi=True))
    ops = difflib.SequenceMatcher(a=original.splitlines(), b=main.splitlines()).get_opcodes()
    removed = [original.splitlines()[i1:i2] for tag, i1, i2, _j1, _j2 in ops if tag in ("replace", "delete")]
    # Only managed keys are rewritten; every other line (comments included) is kept in order.
    flat = [line.strip().split(" =")[0] for chunk in removed for line in chunk]
    assert set(flat) <= {"imports", "default_runtime_name", "enable_cdi"}
    for line in original.splitlines():
        if line.lstrip().startswith("#") or "# must match" in line:
            assert line in main.splitlines()


# --------------------------------------------------------------------------------------
# Config version
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, major, override, version, source",
    [
        ("version = 2\n", 2, None, 2, "file"),
        ("version = 3\n", 1, None, 3, "file"),
        ("version = 4\n", None, None, 4, "file"),
        ("", 1, None, 2, "containerd"),
        ("", 2, None, 3, "containerd"),
        ("", None, None, 2, "default"),
        ("", 2, 2, 2, "option"),
        ('disabled_plugins = ["cri"]\n', 2, None, 3, "containerd"),
        ('[plugins.cri.containerd]\n  snapshotter = "overlayfs"\n', 2, None, 1, "v1"),
        ('disabled_plugins = ["aufs"]\n', 1, None, 1, "v1"),
    ],
)
def test_detect_version(text, major, override, version, source):
    doc = edit.parse_toml(text, MAIN)
    assert containerd_config.detect_version(doc, major, override) == (version, source)


@pytest.mark.parametrize("text", ["version = 5\n", 'version = "two"\n'])
def test_unsupported_version_is_refused(text):
    with pytest.raises(GpuFleetError, match="unsupported containerd config version"):
        plan(text)


def test_version_1_file_gets_version_1_tables_and_no_version():
    original = '[plugins.cri.containerd]\n  snapshotter = "overlayfs"\n'
    main, dropin = outputs(plan(original, containerd_major=1))
    assert "version" not in toml_plain(main) and "version" not in toml_plain(dropin)
    assert runtimes_of(toml_plain(dropin), "cri")["nvidia"]["runtime_type"] == "io.containerd.runc.v2"


def test_version_written_where_the_file_has_none_and_recorded():
    original = fixture_text("docker-containerd.io-config.toml")
    main, dropin = outputs(plan(original, containerd_major=1, enable_cri=True))
    lines = main.splitlines()
    assert lines.index("version = 2") < lines.index("disabled_plugins = []")
    assert main.startswith("#   Copyright 2018-2022 Docker Inc.")
    record = managed.find_record_in_text(dropin)
    assert {"path": ["version"], "raw": None, "set": 2} in record["keys"]


# --------------------------------------------------------------------------------------
# disabled_plugins (Docker's containerd.io) and enable_cri
# --------------------------------------------------------------------------------------


def test_docker_cri_disabled_is_renamed_for_version_2_and_warned():
    """containerd 1.x refuses ``cri`` in a version 2 file ("invalid disabled plugin URI")."""
    p = plan(fixture_text("docker-containerd.io-config.toml"), containerd_major=1)
    assert toml_plain(p.file(MAIN).after)["disabled_plugins"] == ["io.containerd.grpc.v1.cri"]
    assert any("the CRI plugin is disabled" in w and "enable_cri" in w for w in p.warnings)


@pytest.mark.parametrize(
    "disabled, left",
    [
        ('["cri"]', []),
        ('["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.zfs"]', ["io.containerd.snapshotter.v1.zfs"]),
        ('["io.containerd.cri.v1.images", "io.containerd.cri.v1.runtime"]', []),
    ],
)
def test_enable_cri_removes_the_cri_plugin_from_disabled_plugins(disabled, left):
    # "cri" alone is Docker's file: no version (version 1 names)
    original = ("" if "." not in disabled else "version = 2\n") + "disabled_plugins = %s\n" % disabled
    for mode in MODES:
        p = plan(original, mode=mode, enable_cri=True, containerd_major=1)
        assert toml_plain(p.file(MAIN).after)["disabled_plugins"] == left
        main, dropin = outputs(p)
        assert outputs(plan(main, dropin, mode=mode, state="absent"))[0] == original


# --------------------------------------------------------------------------------------
# imports, switching modes, absent of files the module did not write
# --------------------------------------------------------------------------------------


def test_import_is_appended_to_existing_imports_and_removed_exactly():
    original = 'version = 2\nimports = ["/etc/containerd/site.toml"]  # site settings\n'
    main, dropin = outputs(plan(original))
    assert 'imports = ["/etc/containerd/site.toml", "/etc/containerd/conf.d/*.toml"]  # site settings' in main
    assert outputs(plan(main, dropin, state="absent")) == (original, None)


def test_import_that_was_already_there_is_left_on_absent():
    original = 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n'
    main, dropin = outputs(plan(original))
    assert main == original
    assert outputs(plan(main, dropin, state="absent")) == (original, None)


def test_absent_keeps_the_import_while_other_dropins_use_it():
    original = fixture_text("containerd-1.6.20-default.toml")
    main, dropin = outputs(plan(original))
    p = plan(main, dropin, state="absent", other_dropins=["/etc/containerd/conf.d/10-site.toml"])
    assert GLOB in toml_plain(p.file(MAIN).after)["imports"]
    assert p.file(DROPIN).after is None
    assert any("10-site.toml" in w for w in p.warnings)


def test_absent_leaves_a_value_the_user_changed_since():
    original = fixture_text("containerd-1.6.20-default.toml")
    main, _dropin = outputs(plan(original, mode="inplace", set_as_default=True))
    main = main.replace('default_runtime_name = "nvidia"', 'default_runtime_name = "kata"')
    p = plan(main, mode="inplace", state="absent")
    assert toml_plain(p.file(MAIN).after)["plugins"][V2]["containerd"]["default_runtime_name"] == "kata"
    assert any("default_runtime_name was changed" in w for w in p.warnings)


def test_absent_removes_a_handler_nvidia_ctk_wrote_and_gives_the_default_back():
    original = fixture_text("containerd-1.6.20-default.toml")
    theirs = original.replace('default_runtime_name = "runc"', 'default_runtime_name = "nvidia"').replace(
        '      [plugins."io.containerd.grpc.v1.cri".containerd.untrusted_workload_runtime]',
        '        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
        '          runtime_type = "io.containerd.runc.v2"\n'
        '          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
        '            BinaryName = "/usr/bin/nvidia-container-runtime"\n\n'
        '      [plugins."io.containerd.grpc.v1.cri".containerd.untrusted_workload_runtime]',
    )
    p = plan(theirs, state="absent")
    config = toml_plain(p.file(MAIN).after)
    assert "nvidia" not in runtimes_of(config, V2)
    assert config["plugins"][V2]["containerd"]["default_runtime_name"] == "runc"


@pytest.mark.parametrize("first, second", [("dropin", "inplace"), ("inplace", "dropin")])
def test_switching_mode_moves_the_handler(first, second):
    original = fixture_text("debian-containerd-etc-config.toml")
    main, dropin = outputs(plan(original, mode=first, set_as_default=True))
    main, dropin = outputs(plan(main, dropin, mode=second, set_as_default=True))
    config = effective(main, dropin)
    assert runtimes_of(config, V2)["nvidia"]["options"]["BinaryName"] == BINARY
    assert (dropin is None) == (second == "inplace")
    if second == "inplace":
        assert "imports" not in toml_plain(main)
    else:
        assert "nvidia" not in str(toml_plain(main))
    assert outputs(plan(main, dropin, mode=second, state="absent")) == (original, None)


def test_set_as_default_false_gives_back_a_default_the_module_set():
    original = fixture_text("containerd-1.7.24-default.toml")
    main, _dropin = outputs(plan(original, mode="inplace", set_as_default=True, enable_cdi=True))
    main2, _dropin2 = outputs(plan(main, mode="inplace"))
    assert toml_plain(main2)["plugins"][V2]["containerd"]["default_runtime_name"] == "runc"
    assert toml_plain(main2)["plugins"][V2]["enable_cdi"] is toml_plain(original)["plugins"][V2]["enable_cdi"] is False
    assert outputs(plan(main2, mode="inplace", state="absent"))[0] == original


def test_custom_names_and_paths():
    p = ctd.plan_containerd(
        "/etc/containerd/config.toml",
        fixture_text("containerd-2.1.9-default.toml"),
        None,
        containerd_config.ContainerdOptions(
            runtime_name="nvidia-cdi",
            binary_name="/usr/bin/nvidia-container-runtime.cdi",
            dropin_path="/etc/containerd/config.d/50-gpu.toml",
        ),
    )
    assert p.file("/etc/containerd/config.d/50-gpu.toml").action == "create"
    assert "/etc/containerd/config.d/*.toml" in toml_plain(p.file(MAIN).after)["imports"]
    dropin = toml_plain(p.file("/etc/containerd/config.d/50-gpu.toml").after)
    assert runtimes_of(dropin, V3)["nvidia-cdi"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime.cdi"
    assert p.facts["runtime_table"] == 'plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia-cdi'


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"runtime_name": "runc"}, "runtime_name 'runc' cannot be used"),
    ],
)
def test_options_are_checked(kw, message):
    """The one check the module's argument spec cannot make (config_mode and config_version are its choices)."""
    with pytest.raises(GpuFleetError, match=message):
        containerd_config.ContainerdOptions(**kw)


def test_broken_main_file_fails_with_line_and_column_and_writes_nothing():
    broken = fixture_text("containerd-1.6.20-default.toml").replace(
        '[plugins."io.containerd.grpc.v1.cri".cni]', '[plugins."io.containerd.grpc.v1.cri".cni'
    )
    with pytest.raises(GpuFleetError) as exc:
        plan(broken)
    line = broken.splitlines().index('    [plugins."io.containerd.grpc.v1.cri".cni') + 1
    assert exc.value.details["line"] == line
    assert exc.value.details["path"] == MAIN
    assert "(line %d, column" % line in exc.value.msg


def test_broken_dropin_fails_too():
    with pytest.raises(GpuFleetError, match=r"99-nvidia.toml is not valid TOML \(line 1"):
        plan(fixture_text("containerd-1.6.20-default.toml"), "version = = 2\n")


# --------------------------------------------------------------------------------------
# k3s / RKE2
# --------------------------------------------------------------------------------------

TMPL = "/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl"
TMPL3 = "/var/lib/rancher/k3s/agent/etc/containerd/config-v3.toml.tmpl"
GEN = "/var/lib/rancher/k3s/agent/etc/containerd/config.toml"


def k3s(template_text, generated_text, template=TMPL, autodetected=None, **kw):
    kw.setdefault("mode", "inplace")
    return k3s_editor.plan_k3s("k3s", template, template_text, GEN, generated_text, containerd_config.ContainerdOptions(**kw), autodetected)


@pytest.mark.parametrize(
    "generated, template, key",
    [("k3s-v1.30-config.toml", TMPL, V2), ("k3s-v1.33-config.toml", TMPL3, V3)],
)
def test_k3s_template_is_made_from_the_generated_config(generated, template, key):
    gen = fixture_text(generated)
    p = k3s(None, gen, template=template, set_as_default=True, enable_cdi=True)
    text = p.file(template).after
    assert p.file(template).action == "create"
    assert text.startswith("# Managed by gpufleet.nvidia.container_runtime: created from config.toml")
    assert text.endswith(gen) or gen.strip().splitlines()[-1] in text
    config = toml_plain(text)
    nvidia = runtimes_of(config, key)["nvidia"]
    assert nvidia["options"] == {"SystemdCgroup": True, "BinaryName": BINARY}
    assert config["plugins"][key]["containerd"]["default_runtime_name"] == "nvidia"
    assert not k3s(text, gen, template=template, set_as_default=True, enable_cdi=True).changed
    gone = k3s(text, gen, template=template, state="absent")
    assert gone.file(template).after is None  # the module made it: it removes it


def test_k3s_paths():
    base = "/var/lib/rancher/rke2/agent/etc/containerd"
    assert k3s_editor.k3s_paths("rke2", 3) == (base + "/config-v3.toml.tmpl", base + "/config.toml")
    assert k3s_editor.k3s_paths("rke2", 2) == (base + "/config.toml.tmpl", base + "/config.toml")
    assert k3s_editor.k3s_paths("rke2", 3, [base + "/config.toml.tmpl"])[0] == base + "/config.toml.tmpl"


def test_k3s_base_template_gets_only_what_the_base_lacks():
    template = fixture_text("k3s-base.config.toml.tmpl")
    gen = fixture_text("k3s-v1.30-config.toml")
    p = k3s(template, gen)
    text = p.file(TMPL).after
    assert text.startswith('{{ template "base" . }}\n')
    assert text.startswith(template)  # only appended
    added = toml_plain(managed.GoTemplateMask(text).masked)
    runtimes = runtimes_of(added, V2)
    assert "runc" not in runtimes  # the base defines it: a second definition stops containerd
    assert runtimes["nvidia"]["options"] == {"SystemdCgroup": True, "BinaryName": BINARY}
    assert not k3s(text, gen).changed
    assert k3s(text, gen, state="absent").file(TMPL).after == template


def test_k3s_base_template_leaves_the_runtime_to_k3s_when_it_will_add_it():
    template = fixture_text("k3s-base.config.toml.tmpl")
    p = k3s(template, fixture_text("k3s-v1.30-config.toml"), autodetected="/usr/bin/nvidia-container-runtime")
    assert not p.changed
    assert "k3s adds the nvidia runtime by itself" in p.msg


def test_k3s_base_template_refuses_to_redefine_a_base_table():
    template = fixture_text("k3s-base.config.toml.tmpl")
    with pytest.raises(GpuFleetError, match="use k3s's own option: default-runtime: nvidia"):
        k3s(template, fixture_text("k3s-v1.30-config.toml"), set_as_default=True)


def test_k3s_full_template_keeps_its_go_actions():
    template = fixture_text("k3s-full-with-actions.config.toml.tmpl")
    p = k3s(template, fixture_text("k3s-v1.30-config.toml"), set_as_default=True, enable_cdi=True)
    text = p.file(TMPL).after
    for line in template.splitlines():
        assert line in text.splitlines()
    lines = text.splitlines()
    # enable_cdi goes with the unconditional keys, not inside {{- if ... }} ... {{end}}
    assert lines.index("  enable_cdi = true") < lines.index("{{- if .NodeConfig.AgentConfig.PauseImage }}")
    assert "  SystemdCgroup = {{ .SystemdCgroup }}" in lines[lines.index(
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]'):]
    assert not k3s(text, fixture_text("k3s-v1.30-config.toml"), set_as_default=True, enable_cdi=True).changed
    assert k3s(text, None, state="absent").file(TMPL).after == template


def test_k3s_needs_a_generated_config_or_a_template():
    with pytest.raises(GpuFleetError, match="start k3s once"):
        k3s(None, None)
    assert not k3s(None, None, state="absent").changed


def test_k3s_refuses_dropin_mode():
    with pytest.raises(GpuFleetError, match="config_mode=dropin is not supported"):
        k3s(None, fixture_text("k3s-v1.30-config.toml"), mode="dropin")


# --------------------------------------------------------------------------------------
# Other drop-ins in the imported directory
# --------------------------------------------------------------------------------------

SITE = "/etc/containerd/conf.d/50-registry.toml"
SITE_TEXT = 'version = 2\n[plugins."io.containerd.grpc.v1.cri".registry]\n  config_path = "/etc/containerd/certs.d"\n'


def test_dropin_carries_the_cri_table_of_an_earlier_dropin():
    """containerd < 2.1 replaces the CRI table by the last import's: the nvidia drop-in
    must repeat what 50-registry.toml set, or the registry setting would be lost."""
    main, dropin = outputs(ctd.plan_containerd(
        MAIN, fixture_text("debian-containerd-etc-config.toml"), None,
        containerd_config.ContainerdOptions(containerd_version="1.7.24"), others=[(SITE, SITE_TEXT)],
    ))
    cri = toml_plain(dropin)["plugins"][V2]
    assert cri["registry"] == {"config_path": "/etc/containerd/certs.d"}
    assert "cni" not in cri  # replaced by 50-registry.toml's table in containerd 1.7


def test_dropin_merges_earlier_dropins_for_containerd_21():
    main, dropin = outputs(ctd.plan_containerd(
        MAIN, fixture_text("debian-containerd-etc-config.toml"), None,
        containerd_config.ContainerdOptions(containerd_version="2.1.9"), others=[(SITE, SITE_TEXT)],
    ))
    cri = toml_plain(dropin)["plugins"][V2]
    assert cri["registry"] == {"config_path": "/etc/containerd/certs.d"}
    assert cri["cni"] == {"bin_dir": "/usr/lib/cni", "conf_dir": "/etc/cni/net.d"}


def test_a_later_dropin_that_overrides_the_cri_table_is_warned():
    p = ctd.plan_containerd(
        MAIN, fixture_text("containerd-1.6.20-default.toml"), None, containerd_config.ContainerdOptions(),
        others=[("/etc/containerd/conf.d/zz-site.toml", SITE_TEXT)],
    )
    assert any("zz-site.toml sorts after" in w for w in p.warnings)


# --------------------------------------------------------------------------------------
# Hand-written files with odd shapes: tables without a header of their own, no blank
# lines, no version, only tables
# --------------------------------------------------------------------------------------

SPARSE = [
    'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n  snapshotter = "overlayfs"\n',
    'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n  runtime_type = "io.containerd.runc.v2"\n'
    '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n',
    'version = 2\n    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n      runtime_type = "io.containerd.runc.v2"\n',
    '[grpc]\n  address = "/run/x.sock"\n',
    'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "x"\n[plugins."io.containerd.grpc.v1.cri".cni]\n  bin_dir = "/b"\n',
    'version = 2\n\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "x"\n\n'
    '[plugins."io.containerd.grpc.v1.cri".containerd]\n  snapshotter = "o"\n\n[metrics]\n  address = ""\n',
    "# only a comment\n",
    "",
]


@pytest.mark.parametrize("options", [{}, {"set_as_default": True, "enable_cdi": True}], ids=["plain", "default-cdi"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("original", SPARSE)
def test_sparse_files_present_again_absent(original, mode, options):
    main, dropin = outputs(plan(original, mode=mode, containerd_major=1, **options))
    runtimes = runtimes_of(effective(main, dropin), V2)
    assert runtimes["nvidia"]["options"]["BinaryName"] == BINARY and "runc" in runtimes
    assert not plan(main, dropin, mode=mode, containerd_major=1, **options).changed
    assert outputs(plan(main, dropin, mode=mode, state="absent")) == (original, None)


IGNORED_TODAY = [
    '[plugins."io.containerd.grpc.v1.cri".containerd]\n  snapshotter = "overlayfs"\n',
    '    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n      runtime_type = "io.containerd.runc.v2"\n',
    '[plugins."io.containerd.grpc.v1.cri".containerd]\ndefault_runtime_name = "crun"\n',
    '[grpc]\n  address = "/run/x.sock"\n[plugins."io.containerd.cri.v1.images"]\n  snapshotter = "native"\n',
]


@pytest.mark.parametrize("major", [1, 2])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("original", IGNORED_TODAY)
def test_a_table_the_file_without_version_ignores_is_refused_before_the_version_turns_it_on(original, mode, major):
    """Finding 10 of the property suite: containerd reads a file without version as version 1 and ignores a table
    under a version 2 or 3 plugin name; the version the editor writes would turn it on."""
    with pytest.raises(GpuFleetError, match=r"is ignored today: the file has no version.*nothing was written") as error:
        plan(original, mode=mode, containerd_major=major)
    assert error.value.details["path"] == MAIN and error.value.details["key"].startswith("plugins.io.containerd.")


def test_a_file_without_version_and_an_empty_plugin_table_still_gets_the_version():
    main = outputs(plan('[plugins."io.containerd.grpc.v1.cri"]\n', mode="inplace", containerd_major=1))[0]
    assert toml_plain(main)["version"] == 2


@pytest.mark.parametrize(
    "names, written, enable_cri, wanted",
    [
        (["cri", "x"], True, False, ["cri", "x"]),
        (["cri", "x"], False, False, ["io.containerd.grpc.v1.cri", "x"]),  # v1's short name in a file given a version
        (["cri", "io.containerd.cri.v1.images", "x"], False, True, ["x"]),
        ([], False, True, []),
    ],
)
def test_wanted_disabled_plugins(names, written, enable_cri, wanted):
    assert containerd_inplace.wanted_disabled_plugins(names, written, enable_cri) == wanted
