"""Tests of module_utils/common/inputs.py: what each validator takes and refuses, and how a refusal reads."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import inputs
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError

FULL_WIDTH_580 = "\uff15\uff18\uff10"  # what str.isdigit(), int() and \d take for 580


def refuses(validator, value):
    with pytest.raises(inputs.Invalid):
        validator(value)
    return True


@pytest.mark.parametrize("value", [
    "https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64",
    "http://mirror.invalid/cuda/$releasever/$basearch",
    "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)",
    "file:///srv/mirror/cuda",
])
def test_url_takes(value):
    assert inputs.url(value) == value


@pytest.mark.parametrize("value", [
    "http://x\ndeb [trusted=yes] http://y",  # a second source line
    "http://x\n[evil]\ngpgcheck=0",  # a second repository section
    "http://x /",
    "http://x\t",
    "http://x\r",
    "http://mirror.invalid/\u2028x",  # a line separator
    "http://mirror.invalid/\u00e9",
    "ftp://mirror.invalid/x",
    "mirror.invalid/x",
    "http:///path",
    "file:relative",
    "",
    None,
    42,
])
def test_url_refuses(value):
    assert refuses(inputs.url, value)


def test_url_refuses_what_the_file_reads_as_a_separator():
    assert inputs.url("https://a.invalid/x,y") == "https://a.invalid/x,y"
    assert refuses(lambda v: inputs.url(v, forbid=","), "https://a.invalid/x,https://evil.invalid/")


@pytest.mark.parametrize("value, ok", [
    ("/etc/apt/keyrings/k.asc", True),
    ("/usr/share/keyrings/nvidia.gpg", True),
    ("/etc/apt/keyrings/k.asc trusted=yes", False),  # a second option of the source line
    ("/etc/apt/keyrings/k.asc,/tmp/evil.asc", False),  # a second keyring
    ("/etc/apt/keyrings/k.asc]", False),
    ("etc/apt/keyrings/k.asc", False),
    ("/etc/apt/keyrings/../k.asc", False),
    ("/etc/apt//keyrings/k.asc", False),
    ("/etc/apt/keyrings/", False),
    ("/etc/apt/keyrings/k.asc\n", False),
    ("", False),
])
def test_keyring(value, ok):
    if ok:
        assert inputs.keyring(value) == value
    else:
        assert refuses(inputs.keyring, value)


@pytest.mark.parametrize("value, ok", [
    ("/etc/cdi/nvidia.yaml", True),
    ("/", True),
    ("//etc/cdi", False),
    ("/etc/./cdi", False),
    ("/etc/cdi\x00", False),
    ("/etc/c di", False),
])
def test_absolute_path(value, ok):
    if ok:
        assert inputs.absolute_path(value) == value
    else:
        assert refuses(inputs.absolute_path, value)


@pytest.mark.parametrize("value, ok", [
    ("580", True),
    ("580.95.05", True),
    ("1.17.8-1", True),
    ("2:1.0~rc1+dfsg", True),
    (FULL_WIDTH_580, False),
    ("580\n", False),
    (" 580", False),
    ("-580", False),
    ("", False),
    (580, False),
])
def test_version(value, ok):
    if ok:
        assert inputs.version(value) == value
    else:
        assert refuses(inputs.version, value)


@pytest.mark.parametrize("value, ok", [
    ("libcuda1", True),
    ("libstdc++6", True),
    ("nvidia-headless-no-dkms-580-server-open", True),
    ("linux-modules-nvidia-580-server-open-6.8.0-90-generic", True),
    ("libcuda1\nPin: version *", False),
    ("libcuda1 nvidia-smi", False),
    ("libcuda1\n", False),
    ("-oAPT::Get::AllowUnauthenticated=true", False),
    ("LibCuda1", False),
    ("a", False),
    ('a"b', False),
    ("", False),
])
def test_debian_package(value, ok):
    if ok:
        assert inputs.debian_package(value) == value
    else:
        assert refuses(inputs.debian_package, value)


@pytest.mark.parametrize("value, ok", [
    ("535.261.03-1", True),
    ("535.309.01-0+deb12u1", True),
    ("535.171.04-1~deb12u1", True),
    ("1:2.0-1", True),
    ("6.8.0-90.91+2", True),
    ("535.261.03-1\nPin-Priority: 1001", False),
    ("535 1", False),
    ("-1", False),
    ("v1", False),
    ("", False),
])
def test_debian_version(value, ok):
    if ok:
        assert inputs.debian_version(value) == value
    else:
        assert refuses(inputs.debian_version, value)


@pytest.mark.parametrize("validator", [inputs.rpm_package, inputs.rpm_version, inputs.name])
def test_rpm_names_and_plain_names(validator):
    assert validator("nvidia-driver-cuda") == "nvidia-driver-cuda"
    assert validator("3:580.95.05-1.el9") == "3:580.95.05-1.el9"
    assert validator("nvidia-container-runtime.cdi") == "nvidia-container-runtime.cdi"
    for value in ("--setopt=gpgcheck=0", "a b", "a\nb", "a\u200bb", "", None):
        assert refuses(validator, value)


@pytest.mark.parametrize("value, mode", [(0o644, 0o644), ("0644", 0o644), ("644", 0o644), ("0o600", 0o600),
                                         (0o755, 0o755), (0, 0)])
def test_file_mode_takes(value, mode):
    assert inputs.file_mode(value) == mode


@pytest.mark.parametrize("value", [0o664, 0o646, 0o666, "0666", "0777", "u=rw", "0x1a4", "0644\n", "", "06440", 0o10000, -1,
                                   True, None, 6.44])
def test_file_mode_refuses(value):
    assert refuses(inputs.file_mode, value)


def test_file_mode_says_what_it_forbids():
    with pytest.raises(inputs.Invalid) as raised:
        inputs.file_mode(0o666)
    assert raised.value.expected == "a file mode (octal, e.g. 0644) that is not writable by the group or the world"
    assert inputs.file_mode(0o664, forbid=0o002) == 0o664


def test_small_validators():
    assert inputs.boolean(False) is False
    assert refuses(inputs.boolean, "yes") and refuses(inputs.boolean, 1)
    assert inputs.integer(0)(3600) == 3600
    assert refuses(inputs.integer(0), -1) and refuses(inputs.integer(0), True) and refuses(inputs.integer(), "1")
    assert inputs.one_of("a", "b")("b") == "b"
    assert refuses(inputs.one_of("a", "b"), "c")
    assert inputs.optional(inputs.url)("") == ""
    assert refuses(inputs.optional(inputs.url), "x y")
    with pytest.raises(inputs.Invalid) as raised:
        inputs.expecting(inputs.version, "a driver version")(FULL_WIDTH_580)
    assert raised.value.expected == "a driver version"


def test_check_names_the_option_and_the_value():
    rules = {"state": inputs.one_of("present", "absent"), "repo_url": inputs.url}
    assert inputs.check("toolkit", rules, {"state": None, "repo_url": "https://a.invalid/x"})
    with pytest.raises(GpuFleetError) as raised:
        inputs.check("toolkit", rules, {"state": "present", "repo_url": "http://x\ndeb [trusted=yes] http://y"})
    assert raised.value.msg == (
        "toolkit: repo_url 'http://x\\ndeb [trusted=yes] http://y' is not a URL (http, https, file; no whitespace "
        "or control characters)"
    )
    assert raised.value.details == {"option": "repo_url", "value": "http://x\ndeb [trusted=yes] http://y",
                                    "expected": "a URL (http, https, file; no whitespace or control characters)"}


def test_checked_one_value():
    assert inputs.checked("pin: package", inputs.debian_package, "libcuda1") == "libcuda1"
    with pytest.raises(GpuFleetError) as raised:
        inputs.checked("pin: package", inputs.debian_package, "a b", after="; nothing was written")
    assert raised.value.msg.startswith("pin: package 'a b' is not a Debian package name (")
    assert raised.value.msg.endswith("; nothing was written")


@pytest.mark.parametrize("value, ok", [
    ("gpu-operator", True),
    ("nvidia-device-plugin", True),
    ("a.b-c", True),
    ("a" * 53, True),
    ("a" * 54, False),  # helm refuses a name longer than 53
    ("gpu-operator\n", False),  # what re.match(r"...$") takes
    ("--post-renderer=/tmp/x", False),
    ("-x", False),
    ("Gpu-operator", False),
    ("gpu_operator", False),
    ("gpu-", False),
    ("", False),
    (None, False),
])
def test_release_name(value, ok):
    assert (inputs.release_name(value) == value) if ok else refuses(inputs.release_name, value)


@pytest.mark.parametrize("value, ok", [
    ("gpu-operator", True),
    ("nvidia/gpu-operator", True),
    ("oci://ghcr.io/nvidia/k8s-dra-driver-gpu", True),
    ("https://helm.ngc.nvidia.com/nvidia/charts/gpu-operator-v26.7.0.tgz", True),
    ("/srv/charts/gpu-operator-v26.7.0.tgz", True),
    ("./charts/gpu-operator", True),
    ("--post-renderer=/tmp/x", False),
    ("-", False),
    ("gpu-operator\n", False),
    ("gpu operator", False),
    ("gpu-operator\u00e9", False),
    ("", False),
    (1, False),
])
def test_chart_ref(value, ok):
    assert (inputs.chart_ref(value) == value) if ok else refuses(inputs.chart_ref, value)


@pytest.mark.parametrize("value, ok", [
    ("", True),  # not set: the repository's chart
    ("/srv/charts/gpu-operator-v26.7.0.tgz", True),
    ("/srv/charts/gpu-operator", True),
    ("charts/gpu-operator", False),  # relative to whatever folder helm runs in
    ("--post-renderer=/tmp/x", False),
    ("/srv/charts/../../tmp/x", False),
    ("/srv/charts/gpu-operator\n", False),
    (None, False),
])
def test_chart_path(value, ok):
    assert (inputs.chart_path(value) == value) if ok else refuses(inputs.chart_path, value)
