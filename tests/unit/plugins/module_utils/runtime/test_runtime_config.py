"""Tests of module_utils/runtime/edit.py (the shared part of the runtime editors) and config.py (the flow)."""

from __future__ import annotations

import sys

import pytest
import tomlkit

from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import config as rc, config_check, config_plan, files, managed
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import edit
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host import Host
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.runtime.configs import fixture_text, toml_plain


# --------------------------------------------------------------------------------------
# Parsing errors name the line and column
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, line, column",
    [
        ('version = 2\n[plugins\n', 2, 9),
        ('version = 2\n\n[grpc]\n  address = "/run/x.sock\n', 4, 25),
        ('a = 1\na = 2\n', None, None),
    ],
)
def test_parse_toml_error_names_line_and_column(text, line, column):
    with pytest.raises(GpuFleetError) as exc:
        edit.parse_toml(text, "/etc/containerd/config.toml")
    assert exc.value.msg.startswith("/etc/containerd/config.toml is not valid TOML")
    assert "the file was left untouched" in exc.value.msg
    if line is not None:
        assert exc.value.details["line"] == line
        assert exc.value.details["column"] == column
        assert "(line %d, column %d)" % (line, column) in exc.value.msg


@pytest.mark.parametrize(
    "text, line, column",
    [
        # a trailing comma: Python 3.13's json names the comma itself, older ones the brace after it
        ('{\n  "log-driver": "json-file",\n}\n',) + ((2, 28) if sys.version_info >= (3, 13) else (3, 1)),
        ('{\n  "a": 1\n  "b": 2\n}\n', 3, 3),
    ],
)
def test_parse_json_error_names_line_and_column(text, line, column):
    with pytest.raises(GpuFleetError) as exc:
        files.parse_json(text, "/etc/docker/daemon.json")
    assert exc.value.details == {"path": "/etc/docker/daemon.json", "line": line, "column": column}
    assert "(line %d, column %d)" % (line, column) in exc.value.msg


def test_parse_json_refuses_a_non_object():
    with pytest.raises(GpuFleetError, match="must hold a JSON object, found list"):
        files.parse_json("[]", "/etc/docker/daemon.json")


@pytest.mark.parametrize("text", [None, "", "  \n"])
def test_parse_json_empty_is_an_empty_object(text):
    assert files.parse_json(text, "/x") == {}


# --------------------------------------------------------------------------------------
# tomlkit round trip, and its repair
# --------------------------------------------------------------------------------------

INDENTED_IMPLICIT = """[plugins]
  [plugins."x"]
    [plugins."x".cni]
      bin_dir = "/usr/lib/cni"
        [plugins."x".containerd.runtimes.runc]
          runtime_type = "r"
        [plugins."x".containerd.runtimes.nvidia]
          runtime_type = "n"
        [plugins."x".containerd.runtimes.kata]
          runtime_type = "k"
  [plugins."y"]
    path = "/o"
"""


def test_tomlkit_alone_does_not_round_trip_indented_implicit_tables():
    """Why parse_toml repairs: tomlkit doubles the indentation of later sub-tables."""
    assert tomlkit.parse(INDENTED_IMPLICIT).as_string() != INDENTED_IMPLICIT


@pytest.mark.parametrize(
    "name",
    [
        "containerd-1.6.20-default.toml",
        "containerd-1.7.24-default.toml",
        "containerd-2.1.9-default.toml",
        "debian-containerd-etc-config.toml",
        "docker-containerd.io-config.toml",
        "kubeadm-containerd-1.7-commented.toml",
        "k3s-v1.30-config.toml",
        "k3s-v1.33-config.toml",
        "crio.conf",
        "crio-10-crio.conf",
    ],
)
def test_parse_toml_round_trips_the_corpus(name):
    text = fixture_text(name)
    assert edit.parse_toml(text, name).as_string() == text


def test_parse_toml_repairs_indented_implicit_tables():
    assert edit.parse_toml(INDENTED_IMPLICIT, "x").as_string() == INDENTED_IMPLICIT


# --------------------------------------------------------------------------------------
# Layout detection and the drop-in writer
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, step, key_offset, literal",
    [
        ("containerd-1.6.20-default.toml", "  ", "  ", False),
        ("containerd-2.1.9-default.toml", "  ", "  ", True),
        ("debian-containerd-etc-config.toml", "  ", "  ", False),
        ("k3s-v1.30-config.toml", "", "  ", False),
        ("crio.conf", "", "", False),
    ],
)
def test_style_detection(name, step, key_offset, literal):
    style = edit.TomlStyle.detect(fixture_text(name))
    assert (style.step, style.key_offset, style.literal) == (step, key_offset, literal)


def test_dump_toml_writes_containerd_style():
    text = edit.dump_toml(
        {"version": 2, "plugins": {"io.containerd.grpc.v1.cri": {"enable_cdi": True, "containerd": {"runtimes": {}}}}},
        header_comments=["# head"],
    )
    assert text == (
        "# head\n"
        "version = 2\n"
        "\n"
        "[plugins]\n"
        "\n"
        '  [plugins."io.containerd.grpc.v1.cri"]\n'
        "    enable_cdi = true\n"
        "\n"
        '    [plugins."io.containerd.grpc.v1.cri".containerd]\n'
        "\n"
        '      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes]\n'
    )
    assert toml_plain(text)["plugins"]["io.containerd.grpc.v1.cri"]["enable_cdi"] is True


def test_defined_tables_lists_headers_only():
    tables = edit.defined_tables(fixture_text("k3s-v1.30-config.toml"))
    assert ("plugins", "io.containerd.grpc.v1.cri", "containerd", "runtimes", "runc") in tables
    assert ("plugins", "io.containerd.grpc.v1.cri", "containerd", "runtimes") not in tables


# --------------------------------------------------------------------------------------
# The state record
# --------------------------------------------------------------------------------------


def test_record_round_trip():
    record = {"keys": [{"path": ["imports"], "raw": None, "set": ["/etc/containerd/conf.d/*.toml"]}]}
    line = managed.encode_record(record)
    assert line.startswith("# gpufleet.nvidia.container_runtime state: ")
    assert managed.decode_record_line("          " + line) == record
    assert managed.find_record_in_text("version = 2\n" + line + "\n") == record
    assert managed.decode_record_line("# an ordinary comment") is None
    assert managed.find_record_in_text(None) == {}


# --------------------------------------------------------------------------------------
# Go templates (k3s / RKE2)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["k3s-base.config.toml.tmpl", "k3s-full-with-actions.config.toml.tmpl"])
def test_go_template_mask_round_trips(name):
    text = fixture_text(name)
    mask = managed.GoTemplateMask(text)
    assert mask.replacements  # the template has actions
    assert "{{" not in mask.masked
    doc = edit.parse_toml(mask.masked, name)  # the masked text is TOML
    assert mask.unmask(doc.as_string()) == text


def test_go_template_mask_kinds():
    mask = managed.GoTemplateMask('{{ template "base" . }}\n[a."{{ $k }}"]\n  x = {{ .X }}\n  y = "p{{ .Y }}"\n')
    assert mask.uses_base
    plain = toml_plain(mask.masked)
    key = list(plain["a"])[0]
    assert key.startswith("GPUFLEET_GOTMPL_TEXT_")
    assert plain["a"][key]["x"].startswith("GPUFLEET_GOTMPL_VALUE_")
    assert plain["a"][key]["y"].startswith("pGPUFLEET_GOTMPL_TEXT_")


def test_go_template_mask_refuses_multiline_actions():
    with pytest.raises(GpuFleetError, match="spans several lines"):
        managed.GoTemplateMask("{{ if .X\n}}\n")


# --------------------------------------------------------------------------------------
# containerd --version and config dump
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "output, version",
    [
        ("containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3\n", "1.6.20"),
        ("containerd github.com/containerd/containerd 1.7.24~ds1 1.7.24~ds1-6+deb13u1\n", "1.7.24"),
        ("containerd github.com/containerd/containerd/v2 2.1.9+unknown \n", "2.1.9"),
        ("containerd containerd.io 1.7.27 05044ec0a9a75232cad458027ca83437aae3f4da\n", "1.7.27"),
        ("containerd github.com/containerd/containerd v1.7.2 0cae528dd6cb557f7201036e9f43420650207b58\n", "1.7.2"),
        ("", None),
    ],
)
def test_parse_containerd_version(output, version):
    assert config_plan.parse_containerd_version(output) == version


def _dump(version, default="runc", runtimes=("runc", "nvidia"), disabled=()):
    key = {2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"}[version]
    doc = {
        "version": version,
        "disabled_plugins": list(disabled),
        "plugins": {key: {"containerd": {"default_runtime_name": default, "runtimes": {r: {"runtime_type": "x"} for r in runtimes}}}},
    }
    return tomlkit.dumps(doc)


@pytest.mark.parametrize(
    "dump, state, problems",
    [
        (_dump(2), "present", 0),
        (_dump(3), "present", 0),
        (_dump(2, runtimes=("nvidia",)), "present", 1),  # nvidia-ctk's defect on 1.6 / 1.7
        (_dump(2, runtimes=("runc",)), "present", 1),
        (_dump(2, runtimes=("runc",)), "absent", 0),
        (_dump(3, default="nvidia", runtimes=("runc",)), "present", 2),
        (_dump(2, runtimes=(), disabled=("io.containerd.grpc.v1.cri",)), "present", 0),
    ],
)
def test_dump_problems(dump, state, problems):
    assert len(config_check.dump_problems(dump, "nvidia", state)) == problems


# --------------------------------------------------------------------------------------
# The flow, with a host made of dicts
# --------------------------------------------------------------------------------------


class FakeHost:
    """A host whose files are a dict; commands answered from a dict of argv tuples."""

    def __init__(self, files=None, commands=None, binaries=None, tmpdir=None) -> None:
        self.files = dict(files or {})
        self.commands = dict(commands or {})
        self.binaries = dict(binaries or {})
        self.tmpdir = tmpdir
        self.writes = []
        self.links = set()

    def islink(self, path):
        return path in self.links

    def read_bytes(self, path):
        if path not in self.files:
            raise FileNotFoundError(path)
        return self.files[path].encode("utf-8")

    def exists(self, path):
        return path in self.files or path in self.binaries.values() or path in self.commands_paths()

    def commands_paths(self):
        return {argv[0] for argv in self.commands}

    def glob(self, pattern):
        import fnmatch

        return sorted(p for p in self.files if fnmatch.fnmatch(p, pattern))

    def which(self, name):
        return self.binaries.get(name)

    def run(self, argv):
        key = tuple(argv)
        if key in self.commands:
            return self.commands[key]
        if len(argv) > 2 and argv[1] == "--config":  # config dump: no real binary here
            return 0, "", ""
        return 127, "", "not found"

    def write(self, path, text, backup=False):
        self.files[path] = text
        self.writes.append(("write", path))

    def remove(self, path, backup=False):
        self.files.pop(path, None)
        self.writes.append(("remove", path))


def test_configure_reads_the_version_from_containerd_when_the_file_has_none(tmp_path):
    host = FakeHost(
        files={"/etc/containerd/config.toml": fixture_text("docker-containerd.io-config.toml")},
        binaries={"containerd": "/usr/bin/containerd"},
        commands={("/usr/bin/containerd", "--version"): (0, "containerd github.com/containerd/containerd/v2 2.1.9+unknown\n", "")},
        tmpdir=str(tmp_path),
    )
    result = rc.configure({"runtime": "containerd", "enable_cri": True, "validate": False}, host)
    assert result["config_version"] == 3
    assert result["plugin_table"] == 'plugins."io.containerd.cri.v1.runtime"'
    assert result["containerd_version"] == "2.1.9"
    assert toml_plain(host.files["/etc/containerd/config.toml"])["version"] == 3
    assert host.writes == [("write", "/etc/containerd/conf.d/99-nvidia.toml"), ("write", "/etc/containerd/config.toml")]


def test_configure_check_mode_writes_nothing(tmp_path):
    host = FakeHost(files={"/etc/containerd/config.toml": fixture_text("containerd-1.6.20-default.toml")}, tmpdir=str(tmp_path))
    result = rc.configure({"runtime": "containerd"}, host, check_mode=True, diff=True)
    assert result["changed"] and result["restart_needed"]
    assert host.writes == []
    assert [d["after_header"] for d in result["diff"]] == [
        "/etc/containerd/conf.d/99-nvidia.toml",
        "/etc/containerd/config.toml",
    ]
    assert result["diff"][0]["before_header"] == "/etc/containerd/conf.d/99-nvidia.toml (absent)"
    assert result["validation"] == {"ran": False, "reason": "no containerd binary found on the host"}


def test_configure_absent_removes_the_dropin_last(tmp_path):
    host = FakeHost(files={"/etc/containerd/config.toml": fixture_text("containerd-1.6.20-default.toml")}, tmpdir=str(tmp_path))
    rc.configure({"runtime": "containerd", "validate": False}, host)
    host.writes = []
    result = rc.configure({"runtime": "containerd", "state": "absent", "validate": False}, host, diff=True)
    assert host.writes == [("write", "/etc/containerd/config.toml"), ("remove", "/etc/containerd/conf.d/99-nvidia.toml")]
    assert host.files["/etc/containerd/config.toml"] == fixture_text("containerd-1.6.20-default.toml")
    assert result["diff"][1]["after_header"] == "/etc/containerd/conf.d/99-nvidia.toml (absent)"
    assert result["diff"][1]["after"] == ""


@pytest.mark.parametrize(
    "params, message",
    [
        ({"runtime": "docker", "config_mode": "dropin"}, "config_mode=dropin is not supported for runtime=docker"),
        ({"runtime": "k3s", "config_mode": "dropin"}, "config_mode=dropin is not supported for runtime=k3s"),
        ({"runtime": "containerd", "containerd_binary": "/nope/containerd"}, "containerd_binary /nope/containerd does not exist"),
        ({"runtime": "podman"}, "runtime 'podman' is not one of"),
    ],
)
def test_configure_refuses_bad_parameters(params, message, tmp_path):
    with pytest.raises(GpuFleetError, match=message):
        rc.configure(params, FakeHost(tmpdir=str(tmp_path)))


def test_read_text_is_utf8_or_an_error(tmp_path):
    host = Host(str(tmp_path), runner=lambda argv, env=None: (0, "", ""))
    (tmp_path / "ok.toml").write_bytes("# é\n".encode("utf-8"))
    (tmp_path / "latin1.toml").write_bytes(b"# \xe9\n")
    assert files.read_text(host, "/ok.toml") == "# é\n"
    assert files.read_text(host, "/missing.toml") is None
    with pytest.raises(GpuFleetError, match=r"^/latin1.toml is not UTF-8 text: .*; the file was left untouched$"):
        files.read_text(host, "/latin1.toml")


def test_the_flow_finds_containerd_as_the_module_does(tmp_path):
    """get_bin_path (PATH and sbin), not the wider list of folders Host.which also looks in."""

    class Module(object):
        tmpdir = str(tmp_path)

        def get_bin_path(self, name):
            return {"containerd": "/opt/found/containerd"}.get(name)

    assert config_plan._which(Host.for_module(Module()), "containerd") == "/opt/found/containerd"
    assert config_plan._which(FakeHost(binaries={"containerd": "/usr/bin/containerd"}), "containerd") == "/usr/bin/containerd"


def test_every_runtime_has_a_planner():
    assert tuple(config_plan._PLANNERS) == config_plan.RUNTIMES == tuple(rc.ARGUMENT_SPEC["runtime"]["choices"])


@pytest.mark.parametrize(
    "text, version",
    [(None, None), ("", None), ("# no version\n", None), ("version = 3\n", 3), ('root = "/x"\nversion = 2\n', 2)],
)
def test_generated_version(text, version):
    assert config_plan._generated_version(text) == version


def test_k3s_template_is_the_one_that_exists_else_the_generated_files_version():
    base = "/var/lib/rancher/k3s/agent/etc/containerd"
    host = FakeHost(files={base + "/config.toml": "version = 3\n"})
    assert config_plan._k3s_files({"runtime": "k3s"}, host) == (base + "/config-v3.toml.tmpl", base + "/config.toml", "version = 3\n")
    host.files[base + "/config.toml.tmpl"] = ""
    assert config_plan._k3s_files({"runtime": "k3s"}, host)[0] == base + "/config.toml.tmpl"
    assert config_plan._k3s_files({"runtime": "k3s", "config_path": "/srv/t.tmpl"}, host) == ("/srv/t.tmpl", "/srv/config.toml", None)


def test_autodetected_nvidia_runtime():
    assert config_plan._autodetected(FakeHost()) is None
    assert config_plan._autodetected(FakeHost(files={"/usr/bin/nvidia-container-runtime": ""})) == "/usr/bin/nvidia-container-runtime"


@pytest.mark.parametrize(
    "runtime, params, binary, after, reason",
    [
        ("docker", {}, "/usr/bin/containerd", "x", "only containerd configurations are checked"),
        ("containerd", {"validate": False}, "/usr/bin/containerd", "x", "validate=false"),
        ("containerd", {}, None, "x", "no containerd binary found on the host"),
        ("k3s", {}, "/c", "{{ template \"base\" . }}\n", "/t is a Go template; k3s renders it only when it starts"),
        ("k3s", {}, "/c", "version = 2\n", None),
        ("containerd", {}, "/c", "{{ not a template for containerd }}", None),
    ],
)
def test_why_not_validated(runtime, params, binary, after, reason):
    plan = files.Plan([files.FileChange("/t", None, after)])
    context = {"runtime": runtime, "containerd_binary": binary, "main_path": "/t"}
    assert config_check._why_not_validated(plan, params, context) == reason


def test_a_key_ending_in_a_newline_is_quoted_not_written_bare():
    # found by tests/property: re's $ also matches before a final newline, so "runc\n" was bare
    import tomllib  # pylint: disable=import-outside-toplevel
    assert managed.toml_key("runc") == "runc"
    assert managed.toml_key("runc\n") == '"runc\\n"'
    assert tomllib.loads("[%s]\n" % managed.toml_key("runc\n")) == {"runc\n": {}}


@pytest.mark.parametrize("state", ["present", "absent"])
def test_a_partial_file_of_a_killed_write_in_the_crio_folder_is_taken_away_by_the_next_run(tmp_path, state):
    """CRI-O reads every file of crio.conf.d, dotfiles included, and does not start on a partial TOML file."""
    host = FakeHost(files={"/etc/crio/crio.conf": "[crio.runtime]\n"}, tmpdir=str(tmp_path))
    rc.configure({"runtime": "crio"}, host)
    partial = "/etc/crio/crio.conf.d/.99-nvidia.toml.k2j4.gpufleet-partial"
    host.files[partial] = "[crio.runtime.runtimes.nvi"
    host.writes = []
    result = rc.configure({"runtime": "crio", "state": state}, host)
    assert result["changed"] and partial not in host.files and ("remove", partial) in host.writes
    assert {"path": partial, "action": "delete"} in result["files"]
    assert not rc.configure({"runtime": "crio", "state": state}, host)["changed"]


FOREIGN_DROPIN = ('# the site\'s own\nversion = 2\n[plugins."io.containerd.grpc.v1.cri"]\n'
                  'sandbox_image = "registry.example.com/pause:3.9"\n')


@pytest.mark.parametrize("runtime, dropin, main", [
    ("containerd", "/etc/containerd/conf.d/99-nvidia.toml", ("/etc/containerd/config.toml", "containerd-1.6.20-default.toml")),
    ("crio", "/etc/crio/crio.conf.d/99-nvidia.toml", ("/etc/crio/crio.conf", None)),
])
def test_a_dropin_the_module_did_not_write_is_never_overwritten(tmp_path, runtime, dropin, main):
    host = FakeHost(files={main[0]: fixture_text(main[1]) if main[1] else "[crio.runtime]\n", dropin: FOREIGN_DROPIN},
                    tmpdir=str(tmp_path))
    with pytest.raises(GpuFleetError) as error:
        rc.configure({"runtime": runtime, "validate": False}, host)
    assert error.value.msg.startswith("%s was not written by gpufleet.nvidia" % dropin)
    assert host.writes == [] and host.files[dropin] == FOREIGN_DROPIN


@pytest.mark.parametrize("runtime, dropin, main", [
    ("containerd", "/etc/containerd/conf.d/99-nvidia.toml", ("/etc/containerd/config.toml", "containerd-1.6.20-default.toml")),
    ("crio", "/etc/crio/crio.conf.d/99-nvidia.toml", ("/etc/crio/crio.conf", None)),
])
@pytest.mark.parametrize("params", [{"config_mode": "inplace"}, {"state": "absent"}])
def test_a_dropin_the_module_did_not_write_is_never_deleted(tmp_path, runtime, dropin, main, params):
    host = FakeHost(files={main[0]: fixture_text(main[1]) if main[1] else "[crio.runtime]\n", dropin: FOREIGN_DROPIN},
                    tmpdir=str(tmp_path))
    result = rc.configure(dict(params, runtime=runtime, validate=False), host)
    assert host.files[dropin] == FOREIGN_DROPIN and ("remove", dropin) not in host.writes
    assert {"path": dropin, "action": "unchanged"} in result["files"]
    assert any("%s was not written by gpufleet.nvidia" % dropin in w for w in result["warnings"])


def test_a_link_at_the_dropins_path_is_not_the_modules(tmp_path):
    host = FakeHost(files={"/etc/containerd/config.toml": fixture_text("containerd-1.6.20-default.toml")}, tmpdir=str(tmp_path))
    rc.configure({"runtime": "containerd", "validate": False}, host)
    host.links = {"/etc/containerd/conf.d/99-nvidia.toml"}  # the same text, through a link to a file of another owner
    host.writes = []
    result = rc.configure({"runtime": "containerd", "state": "absent", "validate": False}, host)
    assert ("remove", "/etc/containerd/conf.d/99-nvidia.toml") not in host.writes
    assert any(w.startswith("/etc/containerd/conf.d/99-nvidia.toml was not written by gpufleet.nvidia (it is a symbolic link)")
               for w in result["warnings"])


@pytest.mark.parametrize("text", ["version = 2", "# c", "version = 3", 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  x = 1'])
@pytest.mark.parametrize("set_as_default", [False, True])
def test_absent_in_dropin_mode_gives_back_a_main_file_without_a_final_newline(tmp_path, text, set_as_default):
    host = FakeHost(files={"/etc/containerd/config.toml": text}, tmpdir=str(tmp_path))
    params = {"runtime": "containerd", "validate": False, "set_as_default": set_as_default}
    rc.configure(params, host)
    rc.configure(dict(params, state="absent"), host)
    assert host.files["/etc/containerd/config.toml"] == text


@pytest.mark.parametrize("mode, later", [
    ("dropin", "/etc/crio/crio.conf.d/99-zz.conf"),  # read after 99-nvidia.toml
    ("dropin", "/etc/crio/crio.conf.d/zz/10-default.conf"),  # CRI-O reads the files of sub-folders, in their place
    ("inplace", "/etc/crio/crio.conf.d/.zz"),  # and dotfiles, after crio.conf
    ("inplace", "/etc/crio/crio.conf.d/zz/10-default.conf"),
])
def test_crio_set_as_default_is_refused_where_a_file_crio_reads_later_sets_another_default(tmp_path, mode, later):
    host = FakeHost(files={"/etc/crio/crio.conf": "[crio.runtime]\n",
                           later: '[crio.runtime]\ndefault_runtime = "crun"\n'}, tmpdir=str(tmp_path))
    with pytest.raises(GpuFleetError) as error:
        rc.configure({"runtime": "crio", "set_as_default": True, "config_mode": mode}, host)
    assert error.value.msg.startswith("%s sets crio.runtime.default_runtime" % later)
    assert host.writes == []


def test_crio_set_as_default_takes_a_default_read_before_its_dropin(tmp_path):
    host = FakeHost(files={"/etc/crio/crio.conf": "[crio.runtime]\n",
                           "/etc/crio/crio.conf.d/10-crio.conf": '[crio.runtime]\ndefault_runtime = "crun"\n'}, tmpdir=str(tmp_path))
    assert rc.configure({"runtime": "crio", "set_as_default": True}, host)["changed"]


def test_crio_reads_its_dropins_in_its_own_order(tmp_path):
    (tmp_path / "d" / "b").mkdir(parents=True)
    for name in ("a.conf", ".hidden", "b/x.conf", "b-c.conf", "99-nvidia.toml"):
        (tmp_path / "d" / name).write_text("")
    host = Host(str(tmp_path), runner=lambda argv, env=None: (0, "", ""))
    assert config_plan._crio_dropins(host, "/d") == ["/d/.hidden", "/d/99-nvidia.toml", "/d/a.conf", "/d/b/x.conf", "/d/b-c.conf"]
