"""The containerd editor and the flow on inputs that must end in a refusal naming the file (and the key), never
a traceback, a half-written configuration or a file containerd would read differently than the module did."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import containerd as ctd, containerd_config, k3s, managed
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.runtime.configs import toml_plain

MAIN = "/etc/containerd/config.toml"
CRI2 = 'plugins."io.containerd.grpc.v1.cri"'


# --------------------------------------------------------------------------------------
# Wrong types: a refusal naming the file and the key
# --------------------------------------------------------------------------------------

SHAPES = [
    ('version = 2\nimports = "/etc/containerd/conf.d/*.toml"\n', "imports must be a list of strings"),
    ("version = 2\nimports = [1]\n", "imports must be a list of strings"),
    ('version = 2\ndisabled_plugins = "cri"\n', "disabled_plugins must be a list of strings"),
    ("version = 2\nplugins = 5\n", "plugins must be a table"),
    ('version = 2\n[plugins]\n"io.containerd.grpc.v1.cri" = 5\n', CRI2 + " must be a table"),
    ('version = 2\n[%s]\ncontainerd = "x"\n' % CRI2, CRI2 + ".containerd must be a table"),
    ("version = 2\n[%s.containerd]\nruntimes = [1]\n" % CRI2, CRI2 + ".containerd.runtimes must be a table"),
    ('version = 2\n[%s.containerd.runtimes]\nrunc = "x"\n' % CRI2, CRI2 + ".containerd.runtimes.runc must be a table"),
    ('version = 2\n[%s.containerd.runtimes.runc]\noptions = "x"\n' % CRI2, CRI2 + ".containerd.runtimes.runc.options must be a table"),
    ("version = 2\n[%s.containerd]\ndefault_runtime_name = 3\n" % CRI2, CRI2 + ".containerd.default_runtime_name must be a string"),
    ("version = 2\n[%s.enable_cdi]\nconf_dir = true\n" % CRI2, CRI2 + ".enable_cdi must be a boolean"),
]


@pytest.mark.parametrize("mode", ["dropin", "inplace"])
@pytest.mark.parametrize("set_as_default", [False, True])
@pytest.mark.parametrize("text, message", SHAPES)
def test_wrong_types_are_refused_with_the_file_and_the_key(text, message, mode, set_as_default):
    with pytest.raises(GpuFleetError) as exc:
        ctd.plan_containerd(MAIN, text, None, containerd_config.ContainerdOptions(mode=mode, set_as_default=set_as_default))
    assert exc.value.msg.startswith(MAIN + ": " + message)
    assert exc.value.msg.endswith("the file was left untouched")


def test_wrong_types_in_an_imported_file_name_that_file():
    other = "/etc/containerd/conf.d/50-site.toml"
    opts = containerd_config.ContainerdOptions(other_dropins=[other])
    with pytest.raises(GpuFleetError, match="^%s: %s.containerd must be a table" % (other, CRI2.replace(".", r"\."))):
        ctd.plan_containerd(MAIN, "version = 2\n", None, opts, others=[(other, 'version = 2\n[%s]\ncontainerd = 1\n' % CRI2)])


DAMAGED = ['{"keys": 5}', '{"keys": [5]}', '{"keys": [{"path": "plugins"}]}', '{"created": [1]}']


@pytest.mark.parametrize("state", ["present", "absent"])
@pytest.mark.parametrize("record", DAMAGED)
def test_a_damaged_state_comment_in_the_dropin_is_a_refusal(record, state):
    dropin = "%s: x\n# %s %s\nversion = 2\n" % (managed.OWNER_MARK, managed.STATE_MARK, record)
    with pytest.raises(GpuFleetError, match="^/etc/containerd/conf.d/99-nvidia.toml: the state comment .* is damaged"):
        ctd.plan_containerd(MAIN, "version = 2\n", dropin, containerd_config.ContainerdOptions(state=state))


@pytest.mark.parametrize("state", ["present", "absent"])
def test_a_damaged_state_comment_in_the_main_file_is_a_refusal(state):
    text = 'version = 2\n[%s.containerd.runtimes.nvidia]\n  # %s {"keys": [7]}\n  runtime_type = "io.containerd.runc.v2"\n' % (
        CRI2, managed.STATE_MARK)
    with pytest.raises(GpuFleetError, match="^%s: the state comment .* is damaged" % MAIN):
        ctd.plan_containerd(MAIN, text, None, containerd_config.ContainerdOptions(state=state, mode="inplace"))


@pytest.mark.parametrize("template", [None, 'version = "two"\n'])
def test_k3s_version_two_is_a_refusal_naming_the_file(template):
    with pytest.raises(GpuFleetError, match="unsupported containerd config version 'two'") as exc:
        generated = 'version = "two"\n' if template is None else "version = 2\n"
        k3s.plan_k3s("k3s", "/t/config.toml.tmpl", template, "/t/config.toml", generated, containerd_config.ContainerdOptions(mode="inplace"))
    assert exc.value.msg.startswith("/t/config.toml" if template is None else "/t/config.toml.tmpl")


def test_k3s_template_with_wrong_types_is_a_refusal():
    with pytest.raises(GpuFleetError, match=r"^/t/config.toml.tmpl: plugins must be a table"):
        k3s.plan_k3s("k3s", "/t/config.toml.tmpl", "version = 2\nplugins = 1\n", "/t/config.toml", None, containerd_config.ContainerdOptions(mode="inplace"))


def test_deep_nesting_is_a_refusal():
    text = "version = 2\na = " + "[" * 5000 + "]" * 5000 + "\n"
    with pytest.raises(GpuFleetError, match="^%s" % MAIN):
        ctd.plan_containerd(MAIN, text, None, containerd_config.ContainerdOptions())


# --------------------------------------------------------------------------------------
# A version-1 file's default_runtime table stays the default: refuse set_as_default
# --------------------------------------------------------------------------------------

LEGACY_V1 = """[plugins.cri.containerd]
  snapshotter = "overlayfs"
  [plugins.cri.containerd.default_runtime]
    runtime_type = "io.containerd.runtime.v1.linux"
    runtime_engine = ""
"""


@pytest.mark.parametrize("mode", ["dropin", "inplace"])
def test_set_as_default_refuses_a_default_runtime_table(mode):
    with pytest.raises(GpuFleetError, match=r"plugins\.cri\.containerd\.default_runtime is set.*could not make nvidia the default"):
        ctd.plan_containerd(MAIN, LEGACY_V1, None, containerd_config.ContainerdOptions(mode=mode, set_as_default=True))


def test_a_default_runtime_table_without_set_as_default_is_left_alone():
    plan = ctd.plan_containerd(MAIN, LEGACY_V1, None, containerd_config.ContainerdOptions(mode="inplace"))
    after = toml_plain(plan.file(MAIN).after)
    assert after["plugins"]["cri"]["containerd"]["default_runtime"]["runtime_type"] == "io.containerd.runtime.v1.linux"
    assert "nvidia" in after["plugins"]["cri"]["containerd"]["runtimes"]


# --------------------------------------------------------------------------------------
# The drop-in carries what every imported file sets, in containerd's order
# --------------------------------------------------------------------------------------


def test_the_dropin_carries_the_settings_of_every_file_the_main_file_imports():
    site = "/etc/containerd/site.toml"
    site_text = 'version = 2\n[%s]\n  sandbox_image = "registry.example/pause:3.9"\n' % CRI2
    main = 'version = 2\nimports = ["%s"]\n[%s]\n  sandbox_image = "registry.k8s.io/pause:3.6"\n' % (site, CRI2)
    dropin = "/etc/containerd/conf.d/99-nvidia.toml"
    opts = containerd_config.ContainerdOptions(import_order=[site, dropin])
    plan = ctd.plan_containerd(MAIN, main, None, opts, others=[(site, site_text)])
    cri = toml_plain(plan.file(dropin).after)["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["sandbox_image"] == "registry.example/pause:3.9"


def test_a_file_imported_after_the_dropin_is_warned_about_in_containerds_order():
    late = "/etc/containerd/zz.toml"
    early = "/etc/containerd/conf.d/50-a.toml"
    dropin = "/etc/containerd/conf.d/99-nvidia.toml"
    text = 'version = 2\n[%s]\n  sandbox_image = "x"\n' % CRI2
    opts = containerd_config.ContainerdOptions(import_order=[early, dropin, late])
    plan = ctd.plan_containerd(MAIN, "version = 2\n", None, opts, others=[(late, text), (early, text.replace('"x"', '"y"'))])
    cri = toml_plain(plan.file(dropin).after)["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["sandbox_image"] == "y"
    assert any(w.startswith(late + " sorts after") for w in plan.warnings)


# --------------------------------------------------------------------------------------
# Text beyond the BMP: real UTF-8 that TOML readers take back
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["dropin", "inplace"])
def test_a_character_beyond_the_bmp_is_written_as_utf8(mode):
    import tomllib

    text = 'version = 2\n[%s.containerd.runtimes.runc]\n  runtime_type = "io.containerd.runc.v2"\n  "k\U0001F600" = "v\U0001F600"\n' % CRI2
    plan = ctd.plan_containerd(MAIN, text, None, containerd_config.ContainerdOptions(mode=mode))
    for change in plan.files:
        if change.after is None:
            continue
        data = tomllib.loads(change.after)
        assert "\\ud83d" not in change.after
        nvidia = data["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["nvidia"]
        assert nvidia["k\U0001F600"] == "v\U0001F600"
        break
    else:  # pragma: no cover
        raise AssertionError(os.linesep.join(str(f) for f in plan.files))


@pytest.mark.parametrize("key, name", [("disabled_plugins", "."), ("disabled_plugins", "a.b.c"), ("required_plugins", "x.y.z.w")])
@pytest.mark.parametrize("mode", ["dropin", "inplace"])
def test_a_plugin_name_version_2_does_not_take_is_refused_when_the_module_writes_the_version(key, name, mode):
    """A file without version is version 1, where containerd takes any name; once the module writes version = 2,
    containerd 1.6 and 1.7 refuse one that is no plugin URI ('invalid disabled plugin URI "." expect
    io.containerd.x.vx', as containerd 1.6.20 says it; found by the property suite)."""
    with pytest.raises(GpuFleetError) as error:
        ctd.plan_containerd(MAIN, '%s = ["%s"]\n' % (key, name), None,
                            containerd_config.ContainerdOptions(mode=mode, containerd_version="1.6.20"))
    assert error.value.msg.startswith("%s: %s entry %r is not a plugin URI" % (MAIN, key, name))
