"""Tests of what nvidia_driver takes from its options and from the host before it writes a file or runs a command.

- every option is checked at the start of the run, before anything is read (check mode too), and a
  value that is not what the option takes is refused by name, the value repr'd;
- what the host answers (apt-cache, dpkg, rpm) and then goes into the pins, the unattended-upgrades
  blacklist, the repository file or a package manager's argv is refused when it would break them;
- a run that fails after its first change puts the files it changed back as they were, byte for
  byte (those it created go), and the holds and locks it released, before the error is raised.
"""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import versions
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import apt
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.apt_holds import (
    PIN_FILE,
    UU_FILE,
    render_pin,
    render_unattended,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import dnf
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import install as driver
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.plan import Plan
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.driver.replay import (
    D12_INSTALLED,
    D12_PRISTINE,
    Replay,
    run,
)

ROCKY = "rocky9/pristine"
ROCKY_INSTALLED = "rocky9/installed-570.172.08-proprietary"
REPO_FILE = "/etc/yum.repos.d/cuda-rhel9.repo"
FULL_WIDTH_580 = "\uff15\uff18\uff10"
URL = "a URL (http, https, file; no whitespace or control characters, no ',')"
DRIVER_VERSION = "a driver version (ASCII digits and dots, expected e.g. 580 or 580.95.05)"


class Untouchable(object):
    """A host that fails the test on any use: the options are refused before anything is read."""

    def __getattr__(self, name):
        raise AssertionError("the host was used (%s) before the options were checked" % name)


# --- the options ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params, message",
    [
        ({"cuda_repo_baseurl": "http://x\n[evil]\ngpgcheck=0"},
         "nvidia_driver: cuda_repo_baseurl 'http://x\\n[evil]\\ngpgcheck=0' is not " + URL),
        ({"cuda_repo_baseurl": "https://mirror.invalid/cuda,https://evil.invalid/"},
         "nvidia_driver: cuda_repo_baseurl 'https://mirror.invalid/cuda,https://evil.invalid/' is not " + URL),
        ({"cuda_repo_baseurl": "https://mirror.invalid/cuda gpgcheck=0"},
         "nvidia_driver: cuda_repo_baseurl 'https://mirror.invalid/cuda gpgcheck=0' is not " + URL),
        ({"cuda_repo_baseurl": "ftp://mirror.invalid/cuda"},
         "nvidia_driver: cuda_repo_baseurl 'ftp://mirror.invalid/cuda' is not " + URL),
        ({"version": FULL_WIDTH_580}, "nvidia_driver: version '%s' is not %s" % (FULL_WIDTH_580, DRIVER_VERSION)),
        ({"version": "580\n"}, "nvidia_driver: version '580\\n' is not " + DRIVER_VERSION),
        ({"version": "580 -oAPT::Get::AllowUnauthenticated=1"},
         "nvidia_driver: version '580 -oAPT::Get::AllowUnauthenticated=1' is not " + DRIVER_VERSION),
        ({"version": FULL_WIDTH_580, "method": "preinstalled"},
         "nvidia_driver: version '%s' is not %s" % (FULL_WIDTH_580, DRIVER_VERSION)),
        ({"method": "pkg"}, "nvidia_driver: method 'pkg' is not one of package, preinstalled"),
        ({"state": "latest"}, "nvidia_driver: state 'latest' is not one of present, absent"),
        ({"flavor": "Open"}, "nvidia_driver: flavor 'Open' is not one of auto, open, proprietary"),
        ({"kernel_modules": "signed"}, "nvidia_driver: kernel_modules 'signed' is not one of auto, precompiled, dkms"),
        ({"fabric_manager": "yes"}, "nvidia_driver: fabric_manager 'yes' is not one of auto, always, never"),
        ({"kernel_headers": "no"}, "nvidia_driver: kernel_headers 'no' is not a boolean (true or false)"),
        ({"manage_sources": 1}, "nvidia_driver: manage_sources 1 is not a boolean (true or false)"),
        ({"cache_valid_time": -1}, "nvidia_driver: cache_valid_time -1 is not a whole number (0 or more)"),
        ({"cache_valid_time": "3600"}, "nvidia_driver: cache_valid_time '3600' is not a whole number (0 or more)"),
    ],
)
@pytest.mark.parametrize("check_mode", [True, False])
def test_options_refused_by_name_before_anything_is_read(params, message, check_mode):
    params = dict({"version": "580"}, **params)
    with pytest.raises(GpuFleetError) as raised:
        driver.run(Untouchable(), params, check_mode=check_mode)
    assert raised.value.msg == message
    assert raised.value.details["option"] in params


def test_every_option_has_a_rule_and_the_rules_follow_the_spec():
    assert sorted(driver.PARAM_RULES) == sorted(driver.ARGUMENT_SPEC)
    for name, spec in driver.ARGUMENT_SPEC.items():
        if spec.get("default") is not None:
            driver.PARAM_RULES[name](spec["default"])  # the defaults pass their own rules
        for choice in spec.get("choices") or ():
            driver.PARAM_RULES[name](choice)


def test_existing_refusals_keep_their_words():
    for params, message in [
        ({"version": "5x5"}, "nvidia_driver: version '5x5' is not a driver version (expected e.g. 580 or 580.95.05)"),
        ({"version": ""}, "nvidia_driver: version is required with method package and state present"),
    ]:
        with pytest.raises(GpuFleetError) as raised:
            driver.run(Untouchable(), params)
        assert raised.value.msg.startswith(message)


def test_rocky9_baseurl_with_a_section_is_refused_in_check_mode_before_any_read(tmp_path):
    replay = Replay(ROCKY, tmp_path)
    with pytest.raises(GpuFleetError) as raised:
        run(replay, version="580", flavor="open", cuda_repo_baseurl="https://mirror.invalid/cuda\n[x]\ngpgcheck=0")
    assert raised.value.msg.startswith("nvidia_driver: cuda_repo_baseurl 'https://mirror.invalid/cuda\\n[x]")
    assert replay.calls == [] and replay.read(REPO_FILE) is None


def test_rocky9_mirror_baseurl_still_taken(tmp_path):
    replay = Replay(ROCKY, tmp_path)
    # the mirror is not configured: it is read through --repofrompath, which the fixture did not record
    with pytest.raises(AssertionError) as raised:
        run(replay, version="580", flavor="open", cuda_repo_baseurl="https://mirror.invalid/cuda/rhel9/x86_64/")
    assert "--repofrompath=cuda-rhel9-x86_64,https://mirror.invalid/cuda/rhel9/x86_64 " in str(raised.value)


def test_driver_versions_are_ascii_digits():
    assert versions.try_parse_driver_version(FULL_WIDTH_580) is None
    assert versions.try_parse_driver_version("\u0665\u0668\u0660") is None  # Arabic-Indic 580
    with pytest.raises(GpuFleetError):
        versions.parse_cuda_version("\uff11\uff12.\uff14")
    assert versions.parse_driver_version("580.95.05").parts == (580, 95, 5)


def test_kernel_release_that_reads_as_an_option_is_refused(tmp_path):
    replay = Replay(D12_PRISTINE, tmp_path)
    replay.host["kernel"] = "--force-yes"
    with pytest.raises(GpuFleetError) as raised:
        run(replay, version="535.261.03", flavor="proprietary")
    assert raised.value.msg.startswith("nvidia_driver: the running kernel's release '--force-yes' is not ")
    assert replay.mutations() == []


# --- what the host answers, before it is written ---------------------------------------------------


@pytest.mark.parametrize("packages", [
    {"libcuda1\nPackage: *\nPin: version *": "1-1"},
    {"libcuda1 nvidia-smi": "1-1"},
    {"-libcuda1": "1-1"},
    {"libcuda1": "1-1\nPin-Priority: 1001"},
    {"libcuda1": "1 1"},
])
def test_pins_refuse_what_breaks_the_preferences_file(packages):
    with pytest.raises(GpuFleetError) as raised:
        render_pin(packages, "535.1.2", "open")
    assert raised.value.msg.startswith("nvidia_driver: %s: " % PIN_FILE)
    assert raised.value.msg.endswith("; nothing was changed")


def test_pins_refuse_a_driver_version_with_a_newline():
    with pytest.raises(GpuFleetError):
        render_pin({"libcuda1": "1-1"}, "535.1.2\nPackage: *", "open")


@pytest.mark.parametrize("name", ['libcuda1";\n    "^.*', "lib cuda1", "-x"])
def test_unattended_upgrades_blacklist_refuses_what_breaks_apt_conf(name):
    with pytest.raises(GpuFleetError) as raised:
        render_unattended([name], "535.1.2")
    assert raised.value.msg.startswith("nvidia_driver: %s: package %r is not a Debian package name" % (UU_FILE, name))


def test_repository_file_refuses_what_breaks_its_section():
    with pytest.raises(GpuFleetError):
        dnf.render_repo("cuda-rhel9-x86_64", "https://x.invalid/\n[evil]\ngpgcheck=0")
    with pytest.raises(GpuFleetError):
        dnf.render_repo("cuda]\n[evil", "https://x.invalid/")
    assert "baseurl=https://x.invalid/cuda\n" in dnf.render_repo("cuda-rhel9-x86_64", "https://x.invalid/cuda")


@pytest.mark.parametrize("install, removals, hold", [
    ({"-oAPT::Get::AllowUnauthenticated=true": "1"}, [], []),
    ({"libcuda1": "-1"}, [], []),
    ({"libcuda1": "1 2"}, [], []),
    ({}, ["--purge"], []),
    ({"libcuda1": "1-1"}, [], ["-q"]),
])
def test_apt_argv_takes_package_names_and_versions_only(install, removals, hold):
    with pytest.raises(GpuFleetError) as raised:
        apt.AptBackend._plan_packages(Plan(), install, removals, hold)
    assert raised.value.msg.startswith("nvidia_driver: apt-")


def test_apt_mark_unhold_takes_package_names_only():
    backend = apt.AptBackend.__new__(apt.AptBackend)
    backend.params = {}
    with pytest.raises(GpuFleetError):
        backend._plan_pins(Plan(), {"pin": None, "unattended": None}, {"libcuda1": "1-1"}, "1.2.3", "open",
                           ["-oDebug::pkgProblemResolver=1"])


@pytest.mark.parametrize("fm_other, install, other", [
    (["--setopt=gpgcheck=0"], {}, []),
    ([], {"--setopt=gpgcheck=0": None}, []),
    ([], {"nvidia-driver-cuda": "3:580 1"}, []),
])
def test_dnf_argv_takes_package_names_and_versions_only(fm_other, install, other):
    with pytest.raises(GpuFleetError) as raised:
        dnf.DnfBackend._plan_packages(Plan(), fm_other, install, other)
    assert raised.value.msg.startswith("nvidia_driver: dnf ")


def test_dnf_sorts_versions_with_digits_only_ascii_counts():
    # "²" is a digit to str.isdigit() and not to int(): the sort no longer fails on it
    assert sorted(dnf.parse_repoquery("a\t\u00b2:1.\u00b2-1\na\t0:1.2-1\n")["a"]) == ["0:1.2-1", "\u00b2:1.\u00b2-1"]


# --- a run that fails after its first change --------------------------------------------------------


class Failing(Replay):
    """A replayed host whose command starting with ``fails`` exits 100."""

    def __init__(self, name, tmp_path, fails, **kwargs):
        super(Failing, self).__init__(name, tmp_path, **kwargs)
        self.fails = tuple(fails)

    def runner(self, argv, env=None):
        if tuple(argv[: len(self.fails)]) == self.fails:
            self.calls.append(list(argv))
            return 100, "", "E: Unable to fetch some archives"
        return super(Failing, self).runner(argv, env)

    def raw(self, path):
        local = os.path.join(self.root, path.lstrip("/"))
        if not os.path.lexists(local):
            return None
        with open(local, "rb") as handle:
            return handle.read(), os.stat(local).st_mode & 0o7777

    def put_bytes(self, path, data, mode=0o644):
        local = os.path.join(self.root, path.lstrip("/"))
        with open(local, "wb") as handle:
            handle.write(data)
        os.chmod(local, mode)


FILES = ("/etc/apt/sources.list", PIN_FILE, UU_FILE, driver.NOUVEAU_FILE)


def test_d12_failed_install_leaves_no_pin_blacklist_or_sources_edit_behind(tmp_path):
    replay = Failing(D12_PRISTINE, tmp_path, ["apt-get", "install"])
    # bytes that are not UTF-8 in a comment: read as text they could not be written back as they were
    replay.put_bytes("/etc/apt/sources.list", b"# caf\xe9\n" + replay.raw("/etc/apt/sources.list")[0], 0o640)
    before = dict((path, replay.raw(path)) for path in FILES)
    with pytest.raises(GpuFleetError) as raised:
        run(replay, check_mode=False, version="535.261.03", flavor="proprietary")
    after = dict((path, replay.raw(path)) for path in FILES)
    assert after == before
    assert before[PIN_FILE] is None and before[UU_FILE] is None
    msg = raised.value.msg
    assert msg.startswith("`apt-get install -y -q ")
    assert "failed (exit 100): E: Unable to fetch some archives; done before it: wrote /etc/apt/sources.list; " \
        "apt-get update -q; wrote %s; wrote %s" % (PIN_FILE, UU_FILE) in msg
    assert msg.endswith("; put back as they were: %s (removed: it was not there), %s (removed: it was not there), "
                        "/etc/apt/sources.list" % (UU_FILE, PIN_FILE))
    assert raised.value.details["restored"] == [UU_FILE, PIN_FILE, "/etc/apt/sources.list"]
    assert not os.listdir(os.path.dirname(replay.root + PIN_FILE))  # no partial file either


def test_d12_failed_move_puts_the_old_pins_and_holds_back(tmp_path):
    replay = Failing(D12_INSTALLED, tmp_path, ["apt-get", "install"])
    os.chmod(replay.root + PIN_FILE, 0o600)
    before = dict((path, replay.raw(path)) for path in FILES)
    with pytest.raises(GpuFleetError) as raised:
        run(replay, check_mode=False, version="535", flavor="proprietary")
    assert dict((path, replay.raw(path)) for path in FILES) == before
    unhold = next(c for c in replay.calls if c[:2] == ["apt-mark", "unhold"])
    assert replay.calls[-1] == ["apt-mark", "hold"] + unhold[2:]  # the holds released for the move come back
    assert raised.value.msg.endswith("; put back as they were: %s, %s, apt-mark hold %s"
                                     % (UU_FILE, PIN_FILE, " ".join(unhold[2:])))


def test_d12_failed_move_brings_a_removed_blacklist_back_with_its_mode(tmp_path):
    replay = Failing(D12_INSTALLED, tmp_path, ["apt-get", "install"])
    os.chmod(replay.root + UU_FILE, 0o600)
    before = replay.raw(UU_FILE)
    with pytest.raises(GpuFleetError):
        run(replay, check_mode=False, version="535", flavor="proprietary", unattended_upgrades_blacklist=False)
    assert replay.raw(UU_FILE) == before


def test_d12_files_stay_once_the_packages_are_installed(tmp_path):
    replay = Failing(D12_PRISTINE, tmp_path, ["apt-mark", "hold"])
    with pytest.raises(GpuFleetError) as raised:
        run(replay, check_mode=False, version="535.261.03", flavor="proprietary")
    # the packages moved: the pins and the blacklist say what is installed now, and stay
    assert "Pin: version 535.261.03-1" in replay.read(PIN_FILE)
    assert replay.read(UU_FILE) is not None
    assert "non-free" in replay.read("/etc/apt/sources.list")
    assert "put back" not in raised.value.msg and "restored" not in raised.value.details


def test_d12_failed_write_puts_the_files_before_it_back(tmp_path):
    replay = Replay(D12_PRISTINE, tmp_path)
    system = replay.system()

    write = system.write

    def full_disk(path, content, backup=False, mode=0o644):
        if path == UU_FILE:
            raise GpuFleetError("could not write %s: No space left on device" % path, path=path)
        return write(path, content, backup=backup, mode=mode)

    system.write = full_disk
    sources = replay.read("/etc/apt/sources.list")
    with pytest.raises(GpuFleetError) as raised:
        driver.run(system, driver.default_params(version="535.261.03", flavor="proprietary"))
    assert raised.value.msg.startswith("could not write %s: No space left on device; done before it: " % UU_FILE)
    assert replay.read("/etc/apt/sources.list") == sources and replay.read(PIN_FILE) is None


def test_rocky9_failed_install_removes_the_new_repository_file(tmp_path):
    replay = Failing(ROCKY, tmp_path, ["dnf", "install", "-y", "--allowerasing"])
    with pytest.raises(GpuFleetError) as raised:
        run(replay, check_mode=False, version="580", flavor="open")
    assert replay.read(REPO_FILE) is None
    assert raised.value.msg.endswith("; put back as they were: dnf module reset -y nvidia-driver, %s (removed: it was not "
                                     "there)" % REPO_FILE)
    assert replay.calls[-1] == ["dnf", "module", "reset", "-y", "nvidia-driver"]


def test_rocky9_failed_move_locks_the_old_packages_again(tmp_path):
    replay = Failing(ROCKY_INSTALLED, tmp_path, ["dnf", "install", "-y", "--allowerasing"])
    with pytest.raises(GpuFleetError):
        run(replay, check_mode=False, version="580", flavor="open")
    delete = next(c for c in replay.calls if c[:4] == ["dnf", "--disablerepo=*", "versionlock", "delete"])
    # newest first: off the new stream, back on the old one, the old packages locked again
    assert replay.calls[-3:] == [
        ["dnf", "module", "reset", "-y", "nvidia-driver"],
        ["dnf", "module", "enable", "-y", "nvidia-driver:570-dkms"],
        ["dnf", "versionlock", "add"] + delete[4:],
    ]
