"""Tests of module_utils/runtime/crio.py and docker.py."""

from __future__ import annotations

import json
import sys

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import crio, managed, undo
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import docker
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.runtime.configs import (
    fixture_text,
    toml_plain,
)

CONF = "/etc/crio/crio.conf"
DROPIN = "/etc/crio/crio.conf.d/99-nvidia.toml"
TEN = "/etc/crio/crio.conf.d/10-crio.conf"

# --------------------------------------------------------------------------------------
# CRI-O
# --------------------------------------------------------------------------------------

#: main crio.conf, other drop-ins
CRIO_CORPUS = {
    "crio.conf": (fixture_text("crio.conf"), []),
    "10-crio.conf-only": (None, [(TEN, fixture_text("crio-10-crio.conf"))]),
    "both": (fixture_text("crio.conf"), [(TEN, fixture_text("crio-10-crio.conf"))]),
    "nothing": (None, []),
}


def crio_plan(main, others, dropin=None, **kw):
    return crio.plan_crio(CONF, main, dropin, others, crio.CrioOptions(**kw))


def crio_outputs(p):
    return p.file(CONF).after, p.file(DROPIN).after


def crio_effective(main, dropin, others):
    texts = [(CONF, main)] + list(others) + [(DROPIN, dropin)]
    return crio.merged_config(texts)


# In place, a default set in crio.conf loses to 10-crio.conf's: refused, tested apart.
CRIO_CASES = [
    pytest.param(case, mode, default, id="%s-%s%s" % (case, mode, "-default" if default else ""))
    for case in sorted(CRIO_CORPUS)
    for mode in ("dropin", "inplace")
    for default in (False, True)
    if not (mode == "inplace" and default and CRIO_CORPUS[case][1])
]


@pytest.mark.parametrize("case, mode, set_as_default", CRIO_CASES)
def test_crio_handler_present_again_absent(case, mode, set_as_default):
    original, others = CRIO_CORPUS[case]
    p = crio_plan(original, others, mode=mode, set_as_default=set_as_default)
    main, dropin = crio_outputs(p)
    config = crio_effective(main, dropin, others)
    nvidia = config["crio"]["runtime"]["runtimes"]["nvidia"]
    assert nvidia["runtime_path"] == "/usr/bin/nvidia-container-runtime"
    assert nvidia["runtime_type"] == "oci"
    if case != "nothing":
        assert p.facts["source_runtime"] == "runc"
        assert nvidia["runtime_root"] == "/run/runc"
        assert nvidia["monitor_path"] == "/usr/libexec/crio/conmon"
    if set_as_default:
        assert config["crio"]["runtime"]["default_runtime"] == "nvidia"
    if mode == "dropin":
        assert main == original  # crio.conf untouched
        assert list(toml_plain(dropin)["crio"]["runtime"]["runtimes"]) == ["nvidia"]
    else:
        assert dropin is None

    again = crio_plan(main, others, dropin, mode=mode, set_as_default=set_as_default)
    assert not again.changed and crio_outputs(again) == (main, dropin)

    gone = crio_plan(main, others, dropin, mode=mode, state="absent")
    assert crio_outputs(gone) == (original, None)


def test_crio_in_place_keeps_the_rest_of_crio_conf():
    """Defect beaten: nvidia-ctk 1.20.0 in place replaces crio.conf with the one table."""
    original = fixture_text("crio.conf")
    main, _dropin = crio_outputs(crio_plan(original, [], mode="inplace", set_as_default=True))
    for line in original.splitlines():
        if line != "# default_runtime = \"runc\"":
            assert line in main.splitlines()
    assert toml_plain(main)["crio"]["runtime"]["cgroup_manager"] == "systemd"


@pytest.mark.parametrize("first, second", [("dropin", "inplace"), ("inplace", "dropin")])
def test_crio_switching_mode_moves_the_handler(first, second):
    original = fixture_text("crio.conf")
    main, dropin = crio_outputs(crio_plan(original, [], mode=first, set_as_default=True))
    main, dropin = crio_outputs(crio_plan(main, [], dropin, mode=second, set_as_default=True))
    assert (dropin is None) == (second == "inplace")
    if second == "dropin":
        assert main == original
    assert crio_effective(main, dropin, [])["crio"]["runtime"]["default_runtime"] == "nvidia"
    assert crio_outputs(crio_plan(main, [], dropin, mode=second, state="absent")) == (original, None)


def test_crio_in_place_default_refused_when_a_dropin_overrides_it():
    with pytest.raises(GpuFleetError, match="10-crio.conf sets crio.runtime.default_runtime, which overrides"):
        crio_plan(fixture_text("crio.conf"), [(TEN, fixture_text("crio-10-crio.conf"))], mode="inplace", set_as_default=True)


def test_crio_does_not_copy_a_monitor_of_another_runtime_type():
    others = [(TEN, '[crio.runtime.runtimes.runc]\nruntime_path = "/usr/libexec/crio/runc"\n'
               'runtime_type = "pod"\nmonitor_path = "/usr/libexec/crio/conmonrs"\nruntime_root = "/run/runc"\n')]
    _main, dropin = crio_outputs(crio_plan(None, others))
    nvidia = toml_plain(dropin)["crio"]["runtime"]["runtimes"]["nvidia"]
    assert nvidia == {"runtime_path": "/usr/bin/nvidia-container-runtime", "runtime_type": "oci", "runtime_root": "/run/runc"}


def test_crio_dropin_text():
    _main, dropin = crio_outputs(crio_plan(None, [(TEN, fixture_text("crio-10-crio.conf"))], set_as_default=True))
    assert dropin.splitlines()[0].startswith("# Managed by gpufleet.nvidia.container_runtime")
    assert toml_plain(dropin) == {
        "crio": {
            "runtime": {
                "default_runtime": "nvidia",
                "runtimes": {
                    "nvidia": {
                        "runtime_path": "/usr/bin/nvidia-container-runtime",
                        "runtime_type": "oci",
                        "runtime_root": "/run/runc",
                        "monitor_path": "/usr/libexec/crio/conmon",
                    }
                },
            }
        }
    }


def test_crio_broken_file():
    with pytest.raises(GpuFleetError, match=r"crio.conf is not valid TOML \(line 2, column"):
        crio_plan("[crio]\n[crio.runtime\n", [])


def test_crio_absent_of_a_handler_it_did_not_write():
    original = fixture_text("crio.conf") + '\n[crio.runtime.runtimes.nvidia]\nruntime_path = "/usr/bin/nvidia-container-runtime"\n'
    original = original.replace('# default_runtime = "runc"', 'default_runtime = "nvidia"')
    main, _dropin = crio_outputs(crio_plan(original, [], mode="inplace", state="absent"))
    config = toml_plain(main)
    assert "nvidia" not in config["crio"]["runtime"]["runtimes"]
    assert "default_runtime" not in config["crio"]["runtime"]


# --------------------------------------------------------------------------------------
# Docker
# --------------------------------------------------------------------------------------

DAEMON = "/etc/docker/daemon.json"
STATE = "/var/lib/gpufleet.nvidia/container_runtime/docker.json"


#: The record the module keeps for the runtime, by original text (a created file's).
RECORD_OF = {None: {"created": True}}


def expected_record(original, options):
    """The record of a file the module created, with ``enable_cdi`` that the file had no CDI feature."""
    record = dict(RECORD_OF.get(original) or {})
    if options.get("enable_cdi"):
        record["features.cdi"] = {}
    return record or None


def docker_plan(text, kept=None, **kw):
    """The plan of daemon.json ``text``, the state file holding ``kept`` (its text, None: no file)."""
    return docker.plan_docker(DAEMON, text, docker.DockerOptions(**kw), kept, STATE)


def docker_run(text, kept=None, **kw):
    """``(daemon.json, state file)``: their texts once the plan is written (None: no file)."""
    p = docker_plan(text, kept, **kw)
    state = p.file(STATE)
    return p.file(DAEMON).after, (state.after if state is not None else kept)


def record_of(kept, name="nvidia"):
    """The state file's record of the runtime ``name`` of DAEMON (None: none)."""
    return (json.loads(kept).get(DAEMON, {}).get(name)) if kept is not None else None


@pytest.mark.parametrize(
    "options",
    [{}, {"set_as_default": True}, {"enable_cdi": True}, {"set_as_default": True, "enable_cdi": True}],
    ids=["plain", "default", "cdi", "default-cdi"],
)
@pytest.mark.parametrize(
    "original",
    [fixture_text("docker-daemon.json"), None, "{}\n", '{"debug": true}', '{\n\t"debug": true\n}\n'],
    ids=["with-other-keys", "no-file", "empty", "one-line", "tabs"],
)
def test_docker_present_again_absent(original, options):
    after, kept = docker_run(original, **options)
    config = json.loads(after)
    # the module records that it created the file (state=absent removes it) and that CDI was off, in its state file
    record = record_of(kept)
    assert ({k: v for k, v in (record or {}).items() if k != undo.UNDO_KEY} or None) == expected_record(original, options)
    assert config["runtimes"]["nvidia"] == {"path": "nvidia-container-runtime", "args": []}
    assert (config.get("default-runtime") == "nvidia") == bool(options.get("set_as_default"))
    assert (config.get("features", {}).get("cdi") is True) == bool(options.get("enable_cdi"))
    before = json.loads(original) if original and original.strip() else {}
    for key, value in before.items():
        assert config[key] == value  # other keys survive
    assert list(config)[: len(before)] == list(before)  # in their order

    again = docker_plan(after, kept, **options)
    assert not again.changed and again.file(DAEMON).after == after

    gone, left = docker_run(after, kept, state="absent", enable_cdi=options.get("enable_cdi", False))
    assert left is None  # the record went with the runtime: no state file is left
    if original is None:
        assert gone is None  # there was no file: none is left
    else:
        assert gone == original  # exact bytes


def test_docker_keeps_the_layout_of_unchanged_keys():
    original = fixture_text("docker-daemon.json")
    after = docker_run(original, enable_cdi=True)[0]
    assert '  "exec-opts": ["native.cgroupdriver=systemd"],\n' in after
    assert after.startswith(original[: original.index('  "storage-driver"')])


def test_docker_one_line_file_stays_one_line():
    after = docker_run('{"debug": true}')[0]
    assert "\n" not in after
    assert json.loads(after)["debug"] is True


def test_docker_keeps_extra_keys_of_an_existing_runtime_entry():
    original = '{"runtimes": {"nvidia": {"path": "/opt/nvidia-container-runtime", "runtimeArgs": ["--debug"]}}}'
    config = json.loads(docker_run(original)[0])
    assert config["runtimes"]["nvidia"] == {"path": "nvidia-container-runtime", "args": [], "runtimeArgs": ["--debug"]}


def test_docker_absent_takes_out_the_cdi_feature_it_turned_on_without_being_asked():
    after, kept = docker_run('{"debug": true}', enable_cdi=True)
    assert docker_run(after, kept, state="absent") == ('{"debug": true}', None)


def test_docker_absent_leaves_features_of_an_entry_without_record_unless_asked():
    written = '{"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}, "features": {"cdi": true}}'
    assert json.loads(docker_run(written, state="absent")[0]) == {"features": {"cdi": True}}
    assert json.loads(docker_run(written, state="absent", enable_cdi=True)[0]) == {}


@pytest.mark.parametrize("cdi", [False, True, None, "yes"])
def test_docker_absent_gives_back_the_cdi_feature_it_overwrote(cdi):
    """Finding 3 of docs/reliability.md: features.cdi was deleted, not put back."""
    original = json.dumps({"features": {"cdi": cdi}})
    after, kept = docker_run(original, enable_cdi=True)
    assert json.loads(after)["features"]["cdi"] is True
    assert docker_plan(after, kept, enable_cdi=True).changed is False
    assert docker_run(after, kept, state="absent", enable_cdi=True)[0] == original


@pytest.mark.parametrize("cdi", ['{"0": null, "": null}', '{"b": 1, "a": {"z": 2, "y": 3}}'])
def test_docker_absent_gives_back_a_replaced_object_in_its_key_order(cdi):
    """Found by the property suite's long profile: the state file was written with sorted keys, so the
    object that enable_cdi replaced came back as {"": null, "0": null}, not the user's bytes."""
    original = '{"features": {"cdi": %s}}' % cdi
    after, kept = docker_run(original, enable_cdi=True)
    assert docker_run(after, kept, state="absent", enable_cdi=True) == (original, None)


@pytest.mark.parametrize("default", [None, [], 0, {"a": "b"}, "runc"])
def test_docker_absent_gives_back_a_default_runtime_of_any_type(default):
    """Finding 3 of docs/reliability.md: a default-runtime that was not a string was removed."""
    original = json.dumps({"default-runtime": default})
    after, kept = docker_run(original, set_as_default=True)
    assert json.loads(after)["default-runtime"] == "nvidia"
    assert docker_run(after, kept, state="absent")[0] == original


def test_docker_a_cdi_feature_changed_since_is_left():
    after, kept = docker_run('{"features": {"cdi": false}}', enable_cdi=True)
    edited = after.replace('"cdi": true', '"cdi": "later"')
    assert json.loads(docker_run(edited, kept, state="absent")[0]) == {"features": {"cdi": "later"}}


@pytest.mark.parametrize("original", ["{}", '{"runtimes": {}}', '{\n  "runtimes": {},\n  "features": {}\n}', '{"a": 1}\n\n'])
def test_docker_absent_gives_back_the_bytes(original):
    """Finding 1 of docs/reliability.md: '{}' came back as '{}\\n', '{"runtimes": {}}' as '{}'."""
    for options in ({}, {"set_as_default": True, "enable_cdi": True}):
        after, kept = docker_run(original, **options)
        assert not docker_plan(after, kept, **options).changed
        assert docker_run(after, kept, state="absent", **options) == (original, None)


def test_docker_absent_after_an_edit_of_the_user_gives_back_the_settings():
    """What is guaranteed when the file changed in between: the user's edit stays, the module's keys go."""
    after, kept = docker_run("{}")
    edited = after.replace('"runtimes"', '"debug": true,\n    "runtimes"', 1)
    assert docker_run(edited, kept, state="absent")[0] == '{\n    "debug": true\n}\n'


# Python 3.13's json names a trailing comma itself ("Illegal trailing comma before end of
# object", line 2 column 16); older ones the "}" after it (line 3, column 1).
TRAILING_COMMA_AT = (2, 16) if sys.version_info >= (3, 13) else (3, 1)


@pytest.mark.parametrize(
    "text, line, column",
    [('{\n  "debug": true,\n}\n',) + TRAILING_COMMA_AT, ('{"runtimes": {"nvidia": }}', 1, 25)],
)
def test_docker_bad_json_fails_with_line_and_column(text, line, column):
    with pytest.raises(GpuFleetError) as exc:
        docker_plan(text)
    assert exc.value.details["line"] == line and exc.value.details["column"] == column
    assert "daemon.json is not valid JSON (line %d, column %d)" % (line, column) in exc.value.msg


@pytest.mark.parametrize("text, key, found", [('{"runtimes": []}', "runtimes", "[]"), ('{"runtimes": "x"}', "runtimes", "'x'"),
                                              ('{"features": 1}', "features", "1"),
                                              ('{"runtimes": {"nvidia": "x"}}', "runtimes.nvidia", "'x'")])
@pytest.mark.parametrize("state", ["present", "absent"])
def test_docker_an_object_that_is_none_is_refused_by_file_key_and_value(text, key, found, state):
    with pytest.raises(GpuFleetError) as error:
        docker_plan(text, state=state)
    assert error.value.msg.startswith("%s: %s must be a JSON object, found %s" % (DAEMON, key, found))


@pytest.mark.parametrize("text", [None, "{}", '{"debug": true}'])
def test_docker_absent_without_the_runtime_changes_nothing(text):
    assert not docker_plan(text, state="absent").changed


@pytest.mark.parametrize(
    "options, name",
    [(crio.CrioOptions, "runc"), (crio.CrioOptions, "crun"), (docker.DockerOptions, "runc"),
     (docker.DockerOptions, "io.containerd.runc.v2"), (docker.DockerOptions, "")],
)
def test_a_handler_name_the_runtime_keeps_for_itself_is_refused(options, name):
    with pytest.raises(GpuFleetError, match="runtime_name %r cannot be used" % name):
        options(runtime_name=name)


# --------------------------------------------------------------------------------------
# Inputs: nothing the options or daemon.json hold breaks the files written
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("options", [crio.CrioOptions, docker.DockerOptions])
@pytest.mark.parametrize("name", ['nvidia"', "nvidia\n[crio.runtime]", "nvidia'", "nvidia gpu", "-nvidia", "nvídia", "nvidia\x00"])
def test_a_handler_name_that_would_break_the_file_is_refused_by_name(options, name):
    with pytest.raises(GpuFleetError) as exc:
        options(runtime_name=name)
    assert exc.value.msg.startswith("runtime_name %r is not a handler name" % name)


@pytest.mark.parametrize("options", [crio.CrioOptions, docker.DockerOptions])
@pytest.mark.parametrize("binary", ["/usr/bin/nvidia-container-runtime\n", "/usr/bin/nvidia container runtime", "-x"])
def test_a_binary_name_with_a_newline_or_a_space_is_refused_by_name(options, binary):
    with pytest.raises(GpuFleetError) as exc:
        options(binary_name=binary)
    assert exc.value.msg.startswith("binary_name %r is not " % binary)


@pytest.mark.parametrize("name", ["nvidia", "nvidia-gpu", "nvidia_experimental", "nvidia.cdi", "Nvidia2"])
def test_ordinary_handler_names_pass(name):
    crio.CrioOptions(runtime_name=name)
    docker.DockerOptions(runtime_name=name)


@pytest.mark.parametrize("text, constant", [
    ('{"debug": NaN}', "NaN"), ('{"max-concurrent-downloads": Infinity}\n', "Infinity"),
    ('{\n  "runtimes": {"x": {"path": "/x", "n": -Infinity}}\n}\n', "-Infinity"),
])
def test_daemon_json_with_nan_or_infinity_is_not_json(text, constant):
    with pytest.raises(GpuFleetError) as exc:
        docker_plan(text)
    assert exc.value.msg.startswith("%s is not valid JSON" % DAEMON)
    assert constant in exc.value.msg and "the file was left untouched" in exc.value.msg


@pytest.mark.parametrize("text, key", [
    ('{"labels": ["a\\ud800b"]}', "labels"),
    ('{"runtimes": {"nvidia": {"path": "/x\\udfff"}}}', "runtimes"),
    ('{"\\ud83d": 1}', "\ud83d"),
])
def test_daemon_json_with_a_lone_surrogate_is_refused_naming_the_key(text, key):
    with pytest.raises(GpuFleetError) as exc:
        docker_plan(text)
    assert exc.value.msg.startswith("%s: " % DAEMON) and "lone surrogate" in exc.value.msg
    assert repr(key)[1:-1] in exc.value.msg and "the file was left untouched" in exc.value.msg


def test_a_surrogate_pair_is_one_character_and_passes():
    after = docker_run('{"labels": ["\\ud83d\\ude00"]}')[0]
    assert json.loads(after)["labels"] == ["\U0001F600"]
    after.encode("utf-8")


def test_render_json_never_writes_nan():
    with pytest.raises(ValueError):
        docker.render_json({"x": float("nan")}, 4, True)
    with pytest.raises(ValueError):
        docker.render_json({"x": float("inf")}, None, True)


# --------------------------------------------------------------------------------------
# Docker: state=absent gives back what was there
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("options", [{}, {"set_as_default": True}, {"enable_cdi": True}])
def test_docker_absent_removes_the_file_the_module_created(options):
    p = docker_plan(None, **options)
    created = p.file(DAEMON)
    assert created.action == "create"
    gone = docker_plan(created.after, p.file(STATE).after, state="absent", enable_cdi=options.get("enable_cdi", False))
    assert gone.file(DAEMON).after is None and gone.file(DAEMON).action == "delete"
    assert gone.file(STATE).action == "delete"


def test_docker_absent_keeps_a_created_file_that_holds_other_keys_now():
    text, kept = docker_run(None)
    after = json.loads(text)
    after["debug"] = True
    gone = docker_run(json.dumps(after), kept, state="absent")[0]
    assert json.loads(gone) == {"debug": True}


@pytest.mark.parametrize("original", ['{"default-runtime": "runc"}\n', '{\n  "default-runtime": "crun",\n  "debug": true\n}\n'])
def test_docker_absent_gives_back_the_default_runtime_it_replaced(original):
    after, kept = docker_run(original, set_as_default=True)
    assert json.loads(after)["default-runtime"] == "nvidia"
    assert not docker_plan(after, kept, set_as_default=True).changed
    assert docker_run(after, kept, state="absent")[0] == original


def test_docker_absent_leaves_a_default_changed_after_the_module_set_it():
    text, kept = docker_run('{"default-runtime": "runc"}', set_as_default=True)
    after = json.loads(text)
    after["default-runtime"] = "crun"
    gone = json.loads(docker_run(json.dumps(after), kept, state="absent")[0])
    assert gone == {"default-runtime": "crun"}


# --- malformed input: a refusal that names the file, the key and what was expected, never a traceback -----


@pytest.mark.parametrize("main, key", [
    ('[crio.runtime]\nruntimes = "x"\n', "crio.runtime.runtimes"),
    ('[[crio.runtime.runtimes]]\n', "crio.runtime.runtimes"),
    ('[crio.runtime.runtimes]\nnvidia = "x"\n', "crio.runtime.runtimes.nvidia"),
    ('[crio.runtime.runtimes]\nrunc = "x"\n', "crio.runtime.runtimes.runc"),
    ('crio = "x"\n', "crio"),
    ('[crio]\nruntime = "x"\n', "crio.runtime"),
])
@pytest.mark.parametrize("mode", ["dropin", "inplace"])
def test_crio_a_table_that_is_not_one_is_refused_by_file_and_key(main, key, mode):
    with pytest.raises(GpuFleetError) as error:
        crio_plan(main, [], mode=mode)
    assert error.value.msg.startswith("%s: %s is not a table" % (CONF, key))
    with pytest.raises(GpuFleetError) as error:
        crio_plan(None, [(TEN, main)], mode=mode)
    assert error.value.msg.startswith("%s: %s is not a table" % (TEN, key))


@pytest.mark.parametrize("text, what", [
    ('{"a": 1e400}', "a number out of range (1e400)"),
    ('{"a": -1e400}', "a number out of range (-1e400)"),
    ('{"a": NaN}', "NaN"),
    ('{"a": Infinity}', "Infinity"),
    ('{"a":' + '[' * 5000 + ']' * 5000 + '}', "nested deeper than"),
])
@pytest.mark.parametrize("state", ["present", "absent"])
def test_docker_json_that_docker_would_not_take_is_refused_by_file(text, what, state):
    with pytest.raises(GpuFleetError) as error:
        docker_plan(text, state=state)
    assert error.value.msg.startswith("%s is not valid JSON" % DAEMON) and what in error.value.msg


@pytest.mark.parametrize("record", [{"keys": "x"}, {"keys": None}, {"keys": [1]}, {"keys": {"a": 1}}, {"created": True},
                                    {"created": [1]}, {"created": "x"}])
@pytest.mark.parametrize("mode, state", [("dropin", "present"), ("inplace", "present"), ("inplace", "absent")])
def test_crio_a_damaged_state_comment_is_refused_by_file(record, mode, state):
    main = ('[crio.runtime.runtimes.nvidia]\n# %s %s\nruntime_path = "/usr/bin/nvidia-container-runtime"\n'
            % (managed.STATE_MARK, json.dumps(record)))
    with pytest.raises(GpuFleetError) as error:
        crio_plan(main, [], mode=mode, state=state)
    assert error.value.msg.startswith("%s: the state comment of gpufleet.nvidia.container_runtime" % CONF)
    assert "is damaged (expected" in error.value.msg


def test_docker_a_null_runtimes_or_features_is_no_object_yet():
    """Docker decodes null into an empty map: the module adds its entry as it would to a file without the key."""
    after = docker_run('{"runtimes": null, "features": null}', enable_cdi=True)[0]
    assert json.loads(after)["runtimes"]["nvidia"]["path"] == docker.DEFAULT_BINARY


# --------------------------------------------------------------------------------------
# Docker: the record an earlier version kept in daemon.json moves into the state file
# --------------------------------------------------------------------------------------

OLD_KEY = "gpufleet.nvidia.container_runtime state"

#: (the user's file, the options, daemon.json as the earlier version left it: its record in the runtime's entry).
LEGACY = [
    ('{\n  "default-runtime": "runc",\n  "debug": true\n}\n', {"set_as_default": True, "enable_cdi": True},
     '{\n  "default-runtime": "nvidia",\n  "debug": true,\n  "runtimes": {\n    "nvidia": {\n      "path": "nvidia-container-runtime",'
     '\n      "args": [],\n      "gpufleet.nvidia.container_runtime state": {\n        "default-runtime": "runc",\n'
     '        "features.cdi": {}\n      }\n    }\n  },\n  "features": {\n    "cdi": true\n  }\n}\n'),
    (None, {},
     '{\n    "runtimes": {\n        "nvidia": {\n            "path": "nvidia-container-runtime",\n            "args": [],\n'
     '            "gpufleet.nvidia.container_runtime state": {\n                "created": true\n            }\n        }\n    }\n}\n'),
    ('{"runtimes": {}, "default-runtime": "runc"}', {"set_as_default": True},
     '{"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": [], "gpufleet.nvidia.container_runtime state": '
     '{"default-runtime": "runc", "undo": {"sha": "537ce8e3bb2b5b3f", "patch": [[0, 1, "{\\"runtimes\\": {}, '
     '\\"default-runtime\\": \\"runc\\"}"]]}}}}, "default-runtime": "nvidia"}'),
]


@pytest.mark.parametrize("original, options, legacy", LEGACY, ids=["default-cdi", "created", "undo-note"])
def test_docker_an_old_in_file_record_moves_into_the_state_file(original, options, legacy):
    old = json.loads(legacy)["runtimes"]["nvidia"][OLD_KEY]
    p = docker_plan(legacy, **options)
    assert p.changed and p.file(STATE).action == "create"
    after, kept = docker_run(legacy, **options)
    config = json.loads(after)
    assert OLD_KEY not in config["runtimes"]["nvidia"] and "gpufleet" not in after
    expected = json.loads(legacy)
    del expected["runtimes"]["nvidia"][OLD_KEY]
    assert config == expected  # the same settings, less the record
    moved = record_of(kept)
    assert {k: v for k, v in moved.items() if k != undo.UNDO_KEY} == {k: v for k, v in old.items() if k != undo.UNDO_KEY}
    assert not docker_plan(after, kept, **options).changed  # moved once
    assert docker_run(after, kept, state="absent", **options) == (original, None)  # nothing lost: the user's bytes


@pytest.mark.parametrize("original, options, legacy", LEGACY, ids=["default-cdi", "created", "undo-note"])
def test_docker_absent_on_an_old_in_file_record_gives_the_bytes_back(original, options, legacy):
    p = docker_plan(legacy, state="absent", **options)
    assert p.file(DAEMON).after == original and p.file(STATE) is None  # no state file written for nothing


def test_docker_an_old_in_file_record_is_merged_over_the_state_file():
    """Both there (an earlier version ran after this one): the in-file record is the newer, the state file's keys stay."""
    legacy = LEGACY[0][2]
    kept = json.dumps({DAEMON: {"nvidia": {"created": True, "default-runtime": "crun"}}})
    after, kept = docker_run(legacy, kept, set_as_default=True, enable_cdi=True)
    assert {k: v for k, v in record_of(kept).items() if k != undo.UNDO_KEY} == {
        "created": True, "default-runtime": "runc", "features.cdi": {}}
    assert OLD_KEY not in json.loads(after)["runtimes"]["nvidia"]


def test_docker_absent_takes_a_stale_record_out_of_the_state_file():
    kept = json.dumps({DAEMON: {"nvidia": {"default-runtime": "runc"}}, "/other/daemon.json": {"nvidia": {"created": True}}})
    p = docker_plan('{"debug": true}', kept, state="absent")
    assert p.file(DAEMON).after == '{"debug": true}'
    assert json.loads(p.file(STATE).after) == {"/other/daemon.json": {"nvidia": {"created": True}}}
