"""Tests of what the property suite found in the runtime config editors (docs/reliability.md,
findings 1 and 4 to 7): byte-exact ``state=absent``, refusals that name the file, tomlkit's
errors, config versions containerd would not load the handler from, CRI-O's second run.

Each minimal input is the one docs/reliability.md gives; every test here failed on the code
before the fix it names.
"""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import containerd as ctd, containerd_config, k3s, managed, toml_edit, undo
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import crio
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import edit
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.runtime.configs import fixture_text

MAIN = "/etc/containerd/config.toml"
DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"
CRIO = "/etc/crio/crio.conf"
CRIO_DROPIN = "/etc/crio/crio.conf.d/99-nvidia.toml"


def ctd_plan(text, **options):
    return ctd.plan_containerd(MAIN, text, None, containerd_config.ContainerdOptions(dropin_path=DROPIN, **options))


def crio_plan(text, **options):
    return crio.plan_crio(CRIO, text, None, [], crio.CrioOptions(dropin_path=CRIO_DROPIN, mode="inplace", **options))


def round_trip(plan, text, **options):
    """``(after, again, removed)``: the file after present, whether a second run changes it, after absent."""
    after = plan(text, **options).files[0].after
    again = plan(after, **options).changed
    return after, again, plan(after, state="absent", **options).files[0].after


# --- finding 1: state=absent gives back the bytes ------------------------------------------------

CTD_BYTES = [
    '[plugins."io.containerd.cri.v1.runtime".containerd.runtimes]\n\n',  # the minimal input: its last blank line
    '[plugins."io.containerd.cri.v1.runtime".containerd.runtimes]',  # no final newline
    'version = 2\n\n[plugins."io.containerd.grpc.v1.cri"]\n\n\n',
    'version = 2\n[plugins]\n[plugins."io.containerd.grpc.v1.cri".containerd]\n',  # an empty table of its own
]


@pytest.mark.parametrize("text", CTD_BYTES)
@pytest.mark.parametrize("options", [{"enable_cdi": True}, {"set_as_default": True, "enable_cdi": True}, {}])
def test_containerd_in_place_absent_gives_back_the_bytes(text, options):
    after, again, removed = round_trip(ctd_plan, text, mode="inplace", **options)
    assert after != text and not again
    assert removed == text


@pytest.mark.parametrize("name", ["containerd-1.7.24-default.toml", "kubeadm-containerd-1.7-commented.toml"])
def test_containerd_in_place_absent_gives_back_a_captured_file(name):
    text = fixture_text(name)
    after, again, removed = round_trip(ctd_plan, text, mode="inplace", set_as_default=True, enable_cdi=True)
    assert not again and removed == text


CRIO_BYTES = [
    "[crio.runtime.runtimes]\n",  # the minimal input: came back as [crio.runtime] + [crio.runtime.runtimes]
    "[crio.runtime.runtimes]",
    "[crio]\n\n[crio.runtime]\n\n\n",
]


@pytest.mark.parametrize("text", CRIO_BYTES)
@pytest.mark.parametrize("set_as_default", [True, False])
def test_crio_in_place_absent_gives_back_the_bytes(text, set_as_default):
    after, again, removed = round_trip(crio_plan, text, set_as_default=set_as_default)
    assert not again and removed == text


def test_absent_after_a_user_edit_gives_back_the_settings_and_keeps_the_edit():
    """The guarantee when the file changed in between: the user's edit stays and the module's keys
    go (settings); the bytes are then what tomlkit leaves, not the patch for another text."""
    text = "[crio.runtime.runtimes]\n"
    after = crio_plan(text, set_as_default=True).files[0].after
    edited = after.replace("[crio.runtime]\n", '[crio.runtime]\nlog_level = "debug"\n', 1)
    removed = crio_plan(edited, state="absent", set_as_default=True).files[0].after
    assert edit.toml_data(removed) == {"crio": {"runtime": {"log_level": "debug", "runtimes": {}}}}


@pytest.mark.parametrize("plan, text, edit_from, edit_to", [
    (crio_plan, "[crio.runtime.runtimes]\n", "[crio.runtime]\n", '[crio.runtime]\nlog_level = "debug"\n'),
    (lambda text, **o: ctd_plan(text, mode="inplace", **o), CTD_BYTES[0], "version = 2\n", "version = 2\noom_score = 0\n"),
])
def test_a_user_edit_keeps_the_note_and_a_second_run_changes_nothing(plan, text, edit_from, edit_to):
    """After a user's edit the note no longer applies; present leaves it (no change every other run),
    and once the edit is undone, absent is exact again."""
    after = plan(text, set_as_default=True).files[0].after
    edited = after.replace(edit_from, edit_to, 1)
    assert edited != after and not plan(edited, set_as_default=True).changed
    assert plan(edited, state="absent", set_as_default=True).files[0].after != text
    assert plan(after, state="absent", set_as_default=True).files[0].after == text


def test_absent_keeps_a_handler_another_tool_wrote_out_of_the_patch():
    """A handler that was there before the module (nvidia-ctk's) is removed by absent, not put back by the patch."""
    text = '[crio.runtime.runtimes.nvidia]\nruntime_path = "/usr/bin/nvidia-container-runtime"\n\n'
    after = crio_plan(text).files[0].after
    assert "undo" not in managed.find_record_in_text(after)
    assert "nvidia" not in crio_plan(after, state="absent").files[0].after


def test_undo_note_round_trip_and_refusal_of_other_texts():
    note = undo.undo_note("a\n", "a\n\n", lambda text: text.strip())
    assert undo.apply_undo("a\n", note) == "a\n\n"
    assert undo.apply_undo("b\n", note) is None  # made for another text
    assert undo.apply_undo("a\n", {"sha": note["sha"], "patch": [[0, 9, "x"]]}) is None  # damaged
    assert undo.undo_note("a\n", "b\n", lambda text: text) is None  # other settings: no note


# --- finding 4: the refusal names the file ---------------------------------------------------------


def test_an_unsupported_version_is_refused_naming_the_file():
    with pytest.raises(GpuFleetError) as exc:
        ctd_plan("version = false\n")
    assert exc.value.msg == "%s: unsupported containerd config version False (expected 1, 2, 3 or 4)" % MAIN
    assert exc.value.details["path"] == MAIN


@pytest.mark.parametrize("value", ["inf", "2.0", "true", '"2"'])
def test_a_version_that_is_no_integer_is_refused_as_containerd_refuses_it(value):
    """``int()`` took 2.0 and true for versions 2 and 1, and raised OverflowError on inf (found by the
    property suite once keys and values were lifted); containerd refuses all of them."""
    with pytest.raises(GpuFleetError, match="^%s: unsupported containerd config version " % MAIN):
        ctd_plan("version = %s\n" % value)


# --- finding 5: tomlkit's NonExistentKey ------------------------------------------------------------


def test_containerd_out_of_order_tables_are_refused_naming_the_file_and_table():
    text = '[plugins]\nrunc = false\n[crio.runtime]\n\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes]\n'
    with pytest.raises(GpuFleetError) as exc:
        ctd_plan(text, mode="inplace")
    assert exc.value.msg.startswith("%s: the table plugins is defined in several places of the file" % MAIN)
    assert "put its tables together (or, for containerd and CRI-O, use config_mode=dropin); the file was left untouched" in exc.value.msg
    assert exc.value.details["table"] == "plugins"


def test_crio_out_of_order_tables_are_refused_naming_the_file_and_table():
    text = '[crio.runtime.runtimes.runc]\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n\n[crio.runtime.runtimes.nvidia]\n'
    with pytest.raises(GpuFleetError) as exc:
        crio_plan(text, runtime_name="nvidia-cdi")
    assert exc.value.msg.startswith("%s: the table crio is defined in several places of the file" % CRIO)


#: Found by the property suite once the strategies were lifted: tomlkit wrote ``enable_cdi`` into an
#: out-of-order CRI table so that the table was declared twice (tomlkit read it back, tomllib and
#: containerd do not): a corruption, now refused.
DECLARED_TWICE = (
    '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n[crio.runtime]\n\nversion = 2\n'
    '[plugins."io.containerd.internal.v1.opt"]\n[plugins."io.containerd.grpc.v1.cri"]\n'
)
#: ... and tomlkit's KeyAlreadyPresent escaped the k3s editor.
KEY_ALREADY_PRESENT = (
    '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n[plugins]\nversion = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n'
)


def k3s_plan(generated, **options):
    opts = containerd_config.ContainerdOptions(mode="inplace", **options)
    return k3s.plan_k3s("k3s", "/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl", None,
                        "/var/lib/rancher/k3s/agent/etc/containerd/config.toml", generated, opts)


@pytest.mark.parametrize("plan, path", [(lambda **o: ctd_plan(DECLARED_TWICE, mode="inplace", **o), MAIN),
                                        (lambda **o: k3s_plan(DECLARED_TWICE, **o), "/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl")],
                         ids=["containerd", "k3s"])
def test_an_edit_that_would_declare_a_table_twice_is_refused(plan, path):
    with pytest.raises(GpuFleetError) as exc:
        plan(enable_cdi=True)
    assert exc.value.msg.startswith("%s: the table plugins is defined in several places of the file" % path)
    assert "the result would not be valid TOML: Cannot declare ('plugins', 'io.containerd.grpc.v1.cri') twice" in exc.value.msg


def test_k3s_out_of_order_tables_are_refused_naming_the_template():
    with pytest.raises(GpuFleetError) as exc:
        k3s_plan(KEY_ALREADY_PRESENT, set_as_default=True)
    assert exc.value.msg.startswith("/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl: the table plugins is defined in several places")


def test_an_error_that_is_not_tomlkit_s_is_not_turned_into_a_refusal():
    with pytest.raises(ZeroDivisionError):
        with toml_edit.refusing_tomlkit_errors(MAIN, edit.parse_toml("", MAIN), ["a"]):
            raise ZeroDivisionError()


# --- finding 6: a config version the installed containerd does not load the handler from ----------


@pytest.mark.parametrize(
    "text, version, words",
    [
        ("version = 1\n", "2.1.9", "containerd 2.1.9 does not read the version 1 CRI table plugins.cri"),
        ("[plugins.cri.containerd.runtimes]\n", "2.1.9", "(a file without version that uses it is version 1)"),
        ("version = 3\n", "1.7.24", "containerd 1.7.24 knows config versions 1 and 2 only"),
        ("version = 4\n", "1.6.20", "(version 4 is containerd 2.x's)"),
    ],
)
@pytest.mark.parametrize("mode", ["dropin", "inplace"])
def test_a_version_the_containerd_does_not_hold_is_refused_by_the_editor(text, version, words, mode):
    with pytest.raises(GpuFleetError) as exc:
        ctd_plan(text, mode=mode, containerd_version=version)
    assert exc.value.msg.startswith("%s: config version " % MAIN) and words in exc.value.msg
    assert exc.value.msg.endswith("; nothing was written")


@pytest.mark.parametrize("text, version", [("version = 1\n", "2.1.9"), ("version = 3\n", "1.7.24")])
def test_a_mismatched_version_can_still_be_removed(text, version):
    assert not ctd_plan(text, state="absent", containerd_version=version).changed


# --- finding 7: CRI-O in place, set_as_default, several runtimes -------------------------------------

SEVERAL = (
    '[crio.runtime]\ndefault_runtime = "kata"\n\n[crio.runtime.runtimes.kata]\n\n'
    '[crio.runtime.runtimes.crun]\nruntime_path = ""\nmonitor_path = ""\n'
)


def test_crio_in_place_default_second_run_copies_the_same_runtime():
    first = crio_plan(SEVERAL, set_as_default=True)
    again = crio_plan(first.files[0].after, set_as_default=True)
    assert first.facts["source_runtime"] == again.facts["source_runtime"] == "kata"
    assert not again.changed, again.diff
    assert crio_plan(first.files[0].after, state="absent", set_as_default=True).files[0].after == SEVERAL
