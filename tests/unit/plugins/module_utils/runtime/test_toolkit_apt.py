"""Tests of module_utils/runtime/toolkit_apt.py: the toolkit's packages on Debian / Ubuntu in one pass (the fake node: fake_apt.py)."""

from __future__ import annotations

import io
import os
import time

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.host import Host
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import toolkit_apt as T
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.runtime.fake_apt import (
    KEY,
    KEY_URL,
    URL,
    FakeApt,
    converge,
    converged,
    params,
)


def verbs(system):
    return [c[0] if c[0] != "apt-get" else "apt-get " + c[1] for c in system.calls]


@pytest.mark.parametrize("given, full", [("1.17.8", "1.17.8-1"), ("1.17.8-1", "1.17.8-1"), ("1.18.0-1~rc.1", "1.18.0-1~rc.1")])
def test_full_version(given, full):
    assert T.full_version(given) == full


@pytest.mark.parametrize("bad", ["1.17", "latest", "", None, "1.17.8 ; rm -rf /"])
def test_bad_versions_are_refused_before_anything_is_read(bad):
    system = FakeApt()
    with pytest.raises(GpuFleetError, match="is not a toolkit version"):
        converge(system, params(version=bad))
    assert system.calls == [] and system.files == {}


def test_fresh_node_gets_key_source_pin_install_and_hold_in_order():
    system = FakeApt(lists_age=None)
    result = converge(system, params(), want_diff=True)
    assert result["changed"] is True
    assert result["actions"] == [
        "write " + T.KEYRING, "write " + T.PIN_FILE, "write " + T.SOURCE_FILE, "apt-get update",
        "apt-get install nvidia-container-toolkit=1.17.8-1 nvidia-container-toolkit-base=1.17.8-1 "
        "libnvidia-container-tools=1.17.8-1 libnvidia-container1=1.17.8-1 python3-tomlkit",
        "apt-mark hold " + " ".join(T.PACKAGES),
    ]
    assert verbs(system) == ["dpkg-query", "apt-get update", "apt-get install", "apt-mark", "dpkg-query"]
    assert system.files[T.SOURCE_FILE] == (
        "# Managed by gpufleet.nvidia.container_toolkit; key from %s\ndeb [signed-by=%s] %s /\n" % (KEY_URL, T.KEYRING, URL))
    assert system.fetched == [KEY_URL] and result["key_downloaded"] is True
    assert "Package: nvidia-container-toolkit nvidia-container-toolkit-base libnvidia-container-tools libnvidia-container1\n" \
        "Pin: version 1.17.8-1\nPin-Priority: 1001\n" in system.files[T.PIN_FILE]
    assert system.files[T.KEYRING] == KEY
    assert result["packages"] == dict((n, "1.17.8-1") for n in T.PACKAGES)
    assert result["held"] == sorted(T.PACKAGES)
    headers = [d["after_header"] for d in result["diff"]]
    assert headers == [T.KEYRING, T.PIN_FILE, T.SOURCE_FILE, "packages (toolkit 1.17.8-1)"]
    assert "nvidia-container-toolkit=1.17.8-1 (held)\n" in result["diff"][-1]["after"]


def test_converged_node_costs_one_dpkg_query_and_changes_nothing():
    system = converged()
    result = converge(system, params())
    assert result["changed"] is False and result["actions"] == []
    assert verbs(system) == ["dpkg-query"]
    assert system.fetched == [] and result["key_downloaded"] is False  # no request to the key's server
    assert result["msg"] == "NVIDIA Container Toolkit 1.17.8-1 installed, pinned and held"


def test_check_mode_plans_everything_and_touches_nothing():
    system = FakeApt(lists_age=None)
    result = converge(system, params(), check_mode=True, want_diff=True)
    assert result["changed"] is True and len(result["actions"]) == 6
    assert system.files == {} and verbs(system) == ["dpkg-query"]
    assert result["packages"] == dict((n, None) for n in T.PACKAGES)


def test_version_move_reinstalls_at_the_new_version_without_refreshing_fresh_lists():
    system = converged("1.17.8-1")
    result = converge(system, params(version="1.18.0-1"))
    assert result["actions"] == [
        "write " + T.PIN_FILE,
        "apt-get install nvidia-container-toolkit=1.18.0-1 nvidia-container-toolkit-base=1.18.0-1 "
        "libnvidia-container-tools=1.18.0-1 libnvidia-container1=1.18.0-1",
        "apt-mark hold " + " ".join(T.PACKAGES),
    ]
    # held packages are moved (--allow-change-held-packages), which releases their holds: held again
    assert "--allow-change-held-packages" in system.calls[1]
    assert result["held"] == sorted(T.PACKAGES)


@pytest.mark.parametrize("version", ["1.18.0-1", "1.17.3-1"])  # an upgrade and a downgrade
def test_a_version_move_holds_the_packages_again_and_the_next_run_changes_nothing(version):
    system = converged("1.17.8-1")
    result = converge(system, params(version=version), want_diff=True)
    assert result["actions"][-1] == "apt-mark hold " + " ".join(T.PACKAGES)
    assert verbs(system) == ["dpkg-query", "apt-get install", "apt-mark", "dpkg-query"]
    assert "nvidia-container-toolkit=%s (held)\n" % version in result["diff"][-1]["after"]
    assert result["held"] == sorted(T.PACKAGES)
    assert all(system.packages[n] == (version, True) for n in T.PACKAGES)
    again = converge(system, params(version=version))
    assert again["changed"] is False and again["actions"] == []


def test_a_version_move_without_hold_leaves_the_packages_released():
    system = converged("1.17.8-1")
    result = converge(system, params(version="1.18.0-1", hold=False))
    assert result["held"] == [] and converge(system, params(version="1.18.0-1", hold=False))["changed"] is False


def test_an_install_with_stale_lists_refreshes_them_first():
    system = converged("1.17.8-1")
    system.age = 7200.0
    converge(system, params(version="1.18.0-1"))
    assert verbs(system)[:3] == ["dpkg-query", "apt-get update", "apt-get install"]


def test_a_rotated_key_rewrites_the_keyring_and_refreshes_the_lists_with_refresh():
    system = converged()
    system.key = KEY.replace("mDMEZabc", "mDMEZnew")
    assert converge(system, params())["changed"] is False  # not looked for without refresh
    result = converge(system, params(repo_key_refresh=True))
    assert result["actions"] == ["write " + T.KEYRING, "apt-get update"]
    assert system.files[T.KEYRING] == system.key and system.fetched == [KEY_URL]
    unchanged = converge(system, params(repo_key_refresh=True))
    assert unchanged["changed"] is False and unchanged["key_downloaded"] is True


@pytest.mark.parametrize("why, files", [
    ("no keyring", {T.KEYRING: None}),
    ("a keyring without a key", {T.KEYRING: "<html>404</html>\n"}),
    ("a source file that does not say where the key came from",
     {T.SOURCE_FILE: "# Managed by gpufleet.nvidia.container_toolkit\ndeb [signed-by=%s] %s /\n" % (T.KEYRING, URL)}),
    ("a key from another URL", {T.SOURCE_FILE: T.render_source(URL, T.KEYRING, "https://old.example.net/gpgkey")}),
    ("a key given inline before", {T.SOURCE_FILE: T.render_source(URL, T.KEYRING, "repo_key")}),
])
def test_the_key_is_downloaded_when_the_keyring_cannot_be_trusted_as_it_is(why, files):
    system = converged()
    system.files.update(files)
    system.key = KEY.replace("mDMEZabc", "mDMEZnew")
    result = converge(system, params())
    assert system.fetched == [KEY_URL] and result["key_downloaded"] is True, why
    assert system.files[T.KEYRING] == system.key
    assert system.files[T.SOURCE_FILE] == T.render_source(URL, T.KEYRING, KEY_URL)
    assert "apt-get update" in result["actions"]
    again = converged()
    again.files = dict(system.files)
    assert converge(again, params())["changed"] is False and again.fetched == []


def test_hold_false_releases_the_hold():
    system = converged()
    result = converge(system, params(hold=False))
    assert result["actions"] == ["apt-mark unhold " + " ".join(T.PACKAGES)]
    assert result["held"] == []


def test_repo_manage_false_leaves_the_repository_alone_and_downloads_nothing():
    system = converged()
    del system.files[T.KEYRING], system.files[T.SOURCE_FILE]
    result = converge(system, params(repo_manage=False))
    assert result["changed"] is False and system.fetched == []


def test_a_key_given_inline_is_not_downloaded():
    system = FakeApt()
    result = converge(system, params(repo_key=KEY.rstrip("\n"), repo_key_refresh=True), check_mode=True)
    assert system.fetched == [] and result["key_downloaded"] is False
    assert result["files"] == sorted([T.KEYRING, T.PIN_FILE, T.SOURCE_FILE])


def test_a_key_that_is_not_armored_fails_before_any_change():
    system = FakeApt(key="<html>404 Not Found</html>")
    with pytest.raises(GpuFleetError, match=r"not an ASCII-armored OpenPGP public key .*nothing was changed"):
        converge(system, params())
    assert system.files == {} and verbs(system) == ["dpkg-query"]


def test_a_failed_install_says_what_apt_said():
    system = FakeApt(fail={"apt-get install": (100, "", "E: Version '1.17.8-1' for 'nvidia-container-toolkit' was not found\n")})
    with pytest.raises(GpuFleetError) as info:
        converge(system, params())
    assert "apt-get install nvidia-container-toolkit=1.17.8-1" in info.value.msg
    assert "(rc 100): E: Version '1.17.8-1' for 'nvidia-container-toolkit' was not found" in info.value.msg
    # the files written before apt ran are put back: there were none
    assert system.files == {} and "put back as they were: " + T.KEYRING in info.value.msg


def test_dpkg_query_failure_is_an_error():
    system = FakeApt(fail={"dpkg-query": (2, "", "dpkg-query: error: database is locked\n")})
    with pytest.raises(GpuFleetError, match="dpkg-query failed .rc 2.: dpkg-query: error: database is locked"):
        converge(system, params())


def test_lists_age_is_the_newest_list_file_and_none_without_lists(tmp_path):
    lists = tmp_path / T.LISTS_DIR.lstrip("/")
    host = Host(str(tmp_path), runner=lambda argv, env=None: (0, "", ""))
    assert T.lists_age(host) is None
    lists.mkdir(parents=True)
    (lists / "lock").write_text("")
    (lists / ".hidden_Packages").write_text("")
    (lists / "partial").mkdir()
    assert T.lists_age(host) is None  # the lock, a hidden file and a folder are not lists
    old, new = lists / "a_Packages", lists / "b_Release"
    old.write_text(""), new.write_text("")
    os.utime(str(old), (time.time() - 7200, time.time() - 7200))
    os.utime(str(new), (time.time() - 60, time.time() - 60))
    assert 59 < T.lists_age(host) < 120


def test_fetch_key_downloads_through_the_module(monkeypatch):
    from ansible.module_utils import urls

    calls = []

    def fetch_url(module, url, timeout=None):
        calls.append((module, url, timeout))
        if url.endswith("missing"):
            return None, {"status": 404, "msg": "Not Found"}
        return io.BytesIO(KEY.encode()), {"status": 200}

    monkeypatch.setattr(urls, "fetch_url", fetch_url)
    assert T.fetch_key("module", KEY_URL) == KEY
    assert calls == [("module", KEY_URL, 30)]
    with pytest.raises(GpuFleetError, match=r"could not download the repository key from .*missing: Not Found \(HTTP 404\)"):
        T.fetch_key("module", KEY_URL + "missing")


def test_converge_downloads_the_key_through_the_hosts_module_by_default(monkeypatch):
    system = FakeApt()
    system.module = "the module"
    monkeypatch.setattr(T, "fetch_key", lambda module, url: system.fetch(url) if module == "the module" else None)
    assert T.converge(system, params(), check_mode=True)["key_downloaded"] is True
    assert system.fetched == [KEY_URL]


class BinaryKeyring(FakeApt):
    def read_bytes(self, path):
        return b"\x99\x01 a binary keyring" if path == T.KEYRING else super().read_bytes(path)


def test_a_keyring_that_is_not_utf8_stops_the_module_untouched():
    system = BinaryKeyring()
    with pytest.raises(GpuFleetError, match="is not UTF-8 text.*the file was left untouched"):
        converge(system, params())
    assert system.files == {}


@pytest.mark.parametrize(
    "repo_files, install, age, update_cache, update",
    [
        ([T.SOURCE_FILE], [], 10, False, True),  # the repository changed: always
        ([T.PIN_FILE], [], None, False, False),  # nothing to install, only the pin
        ([], ["x=1"], None, False, True),  # an install without lists
        ([], ["x=1"], 7200, False, True),  # ... with stale lists
        ([], ["x=1"], 10, False, False),  # ... with fresh lists
        ([], ["x=1"], 10, True, True),  # ... asked for
        ([], [], 7200, True, False),  # asked for, but nothing to install
    ],
)
def test_needs_update(repo_files, install, age, update_cache, update):
    files = dict((path, "") for path in repo_files)
    assert T.needs_update({"lists_age": age}, params(update_cache=update_cache), files, install) is update


def test_holds_to_change_and_the_actions_in_apply_order():
    installed = {"a": {"held": True}, "b": {"held": False}}
    assert T.holds_to_change(installed, params(packages=["a", "b", "c"])) == (["b", "c"], [])
    assert T.holds_to_change(installed, params(packages=["a", "b", "c"], hold=False)) == ([], ["a"])
    assert T.holds_to_change(installed, params(packages=["a", "b", "c"]), ["a=2"]) == (["a", "b", "c"], [])
    todo = {"files": {"/b": "", "/a": ""}, "update_cache": True, "install": ["a=1"], "hold": [], "unhold": ["b", "c"]}
    assert T.actions(todo) == ["write /a", "write /b", "apt-get update", "apt-get install a=1", "apt-mark unhold b c"]
