"""toolkit_apt: no option can change what the apt files or commands say, and a failed apt run leaves the files as they were.

Every option is checked before anything is read or written (in check mode too), by name, its
value repr'd; the writers check what they put into the source and pin files once more; and the
files written before apt are put back, byte for byte, when apt fails (a new one is removed).
"""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import toolkit_apt as T
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.runtime.fake_apt import KEY, FakeApt, converged, params


class RestoringApt(FakeApt):
    """FakeApt that also removes files (as Host.remove) and keeps their bytes."""

    def write(self, path, text, backup=False, mode=0o644):
        self.files[path] = text.decode("utf-8") if isinstance(text, bytes) else text

    def remove(self, path, backup=False):
        self.files.pop(path, None)


BAD = [
    ("repo_url", "http://mirror.example.com/deb /\ndeb [trusted=yes] http://evil.example.com/ /"),
    ("repo_url", "http://mirror.example.com/deb trusted=yes"),
    ("repo_url", "ftp://mirror.example.com/deb"),
    ("keyring", "/etc/apt/keyrings/k.asc trusted=yes"),
    ("keyring", "/etc/apt/keyrings/k.asc,/tmp/other.asc"),
    ("keyring", "relative/k.asc"),
    ("source_file", "/etc/apt/sources.list.d/../x.list"),
    ("pin_file", "preferences.d/x.pref"),
    ("packages", ["nvidia-container-toolkit\nPin: version *\nPin-Priority: 1001"]),
    ("packages", ["--allow-unauthenticated"]),
    ("packages", ["Nvidia Container Toolkit"]),
    ("extra_packages", ["-o=APT::Get::AllowUnauthenticated=true"]),
    ("extra_packages", ["python3-tomlkit\n"]),
    ("repo_key_url", "http://keys.example.com/k\n"),
    ("cache_valid_time", -1),
    ("hold", "yes"),
]


@pytest.mark.parametrize("option, value", BAD, ids=["%s-%d" % (o, i) for i, (o, _v) in enumerate(BAD)])
@pytest.mark.parametrize("check_mode", [False, True])
def test_a_bad_option_is_refused_by_name_before_anything_is_read_or_written(option, value, check_mode):
    system = FakeApt()
    with pytest.raises(GpuFleetError) as info:
        T.converge(system, params(**{option: value}), check_mode=check_mode, fetch=system.fetch)
    label, shown = ("%s[0]" % option, value[0]) if isinstance(value, list) else (option, value)
    assert info.value.msg.startswith("%s %r is not " % (label, shown)), info.value.msg
    assert system.calls == [] and system.files == {} and system.fetched == []


def test_the_default_options_and_a_mirror_pass():
    system = FakeApt()
    T.converge(system, params(repo_url="https://mirror.example.com/libnvidia-container/stable/deb/$(ARCH)"),
               check_mode=True, fetch=system.fetch)


@pytest.mark.parametrize("url, keyring", [
    ("http://m.example.com/ /\ndeb [trusted=yes] http://evil.example.com/", T.KEYRING),
    ("http://m.example.com/", "/k.asc trusted=yes"),
])
def test_render_source_refuses_what_would_change_the_source_line(url, keyring):
    with pytest.raises(GpuFleetError, match="is not "):
        T.render_source(url, keyring, "repo_key")


def test_render_pin_refuses_what_would_add_a_stanza():
    with pytest.raises(GpuFleetError, match="is not a Debian package name"):
        T.render_pin(["nvidia-container-toolkit\nPackage: *"], "1.17.8-1")
    with pytest.raises(GpuFleetError, match="is not a Debian package version"):
        T.render_pin(["nvidia-container-toolkit"], "1.17.8-1\nPin-Priority: 1001")


@pytest.mark.parametrize("verb", ["apt-get update", "apt-get install"])
def test_a_failed_apt_run_puts_the_files_back_byte_for_byte_and_removes_the_new_ones(verb):
    system = RestoringApt(fail={verb: (100, "", "E: no\n")}, lists_age=None)
    system.packages = dict((n, ("1.17.8-1", False)) for n in T.PACKAGES)
    system.files = {T.PIN_FILE: "# my own pin\r\nPackage: x\n"}  # the pin file was there; the others were not
    with pytest.raises(GpuFleetError) as info:
        T.converge(system, params(version="1.18.0-1"), fetch=system.fetch)
    assert "E: no" in info.value.msg
    assert system.files == {T.PIN_FILE: "# my own pin\r\nPackage: x\n"}
    assert "put back as they were" in info.value.msg
    assert sorted(info.value.details["restored"]) == sorted([T.KEYRING, T.PIN_FILE, T.SOURCE_FILE])


def test_a_successful_run_keeps_what_it_wrote():
    system = RestoringApt(lists_age=None)
    T.converge(system, params(), fetch=system.fetch)
    assert system.files[T.KEYRING] == KEY and T.PIN_FILE in system.files and T.SOURCE_FILE in system.files


def test_a_failed_hold_after_the_install_keeps_the_files_that_pin_what_is_installed():
    system = RestoringApt(fail={"apt-mark": (1, "", "E: no\n")}, lists_age=None)
    with pytest.raises(GpuFleetError) as info:
        T.converge(system, params(), fetch=system.fetch)
    assert "put back" not in info.value.msg
    assert system.files[T.PIN_FILE] == T.render_pin(T.PACKAGES, "1.17.8-1") and T.SOURCE_FILE in system.files


def test_a_failed_hold_without_an_install_puts_the_pin_back():
    system = RestoringApt(fail={"apt-mark": (1, "", "E: no\n")})
    system.packages = dict([(n, ("1.17.8-1", False)) for n in T.PACKAGES] + [("python3-tomlkit", ("0.11.7-1", False))])
    system.files = dict(converged().files)
    system.files[T.PIN_FILE] = T.render_pin(T.PACKAGES, "1.17.8-1").replace("1001", "990")
    old = dict(system.files)
    with pytest.raises(GpuFleetError, match="put back as they were: " + T.PIN_FILE):
        T.converge(system, params(), fetch=system.fetch)
    assert system.files == old


@pytest.mark.parametrize("same", [("keyring", "source_file"), ("keyring", "pin_file"), ("source_file", "pin_file")])
@pytest.mark.parametrize("check_mode", [False, True])
def test_two_files_at_one_path_are_refused_before_anything_is_read_or_written(same, check_mode):
    """apt would read the keyring as a source list, or a source list as preferences, and fail on every command."""
    system = FakeApt()
    path = "/etc/apt/one-file"
    with pytest.raises(GpuFleetError) as info:
        T.converge(system, params(**{same[0]: path, same[1]: path}), check_mode=check_mode, fetch=system.fetch)
    assert info.value.msg == "%s %r is also %s: the keyring, the source file and the pin file are three files " \
        "(expected three different paths); nothing was changed" % (same[1], path, same[0])
    assert system.calls == [] and system.files == {} and system.fetched == []
