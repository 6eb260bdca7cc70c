# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The machine under the driver: its OS (os-release), its running kernel and headers, Secure Boot.
"""

from __future__ import annotations

SECURE_BOOT_VAR = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-e098032b8c4c"
MOK_KEY_PATHS = ("/var/lib/dkms/mok.pub", "/var/lib/shim-signed/mok/MOK.der")


def parse_os_release(text):
    values = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, dummy, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        values[key.strip()] = value
    return values


def os_family(os_id, id_like):
    names = [os_id or ""] + (id_like or "").split()
    if any(n in ("debian", "ubuntu") for n in names):
        return "debian"
    if any(n in ("rhel", "fedora", "centos", "rocky", "almalinux") for n in names):
        return "redhat"
    return "other"


def gather_os(host, probes):
    facts = {
        "id": None,
        "id_like": None,
        "version_id": None,
        "version_major": None,
        "codename": None,
        "pretty_name": None,
        "family": "other",
    }
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        if not host.exists(path):
            continue
        try:
            values = parse_os_release(host.read_text(path))
        except (IOError, OSError) as exc:
            probes.error("os_release", "%s: %s" % (path, exc))
            return facts
        facts["id"] = values.get("ID")
        facts["id_like"] = values.get("ID_LIKE")
        facts["version_id"] = values.get("VERSION_ID")
        facts["version_major"] = (values.get("VERSION_ID") or "").split(".", maxsplit=1)[0] or None
        facts["codename"] = values.get("VERSION_CODENAME") or values.get("UBUNTU_CODENAME")
        facts["pretty_name"] = values.get("PRETTY_NAME")
        facts["family"] = os_family(facts["id"], facts["id_like"])
        probes.ok("os_release", "%s: %s" % (path, facts["pretty_name"] or facts["id"]))
        return facts
    probes.missing("os_release", "neither /etc/os-release nor /usr/lib/os-release exists")
    return facts


def gather_kernel(host, probes):
    release = host.kernel_release()
    build = "/lib/modules/%s/build" % release
    headers = host.exists(build)
    if headers:
        probes.ok("kernel_headers", "%s exists" % build)
    else:
        probes.missing("kernel_headers", "%s does not exist" % build)
    return {"release": release, "headers_installed": headers, "headers_path": build}


def gather_secure_boot(host, probes):
    mok = [path for path in MOK_KEY_PATHS if host.exists(path)]
    facts = {
        "state": "unknown",
        "dkms_mok_key": "/var/lib/dkms/mok.pub" in mok,
        "mok_keys": mok,
    }
    if not host.isdir("/sys/firmware/efi", kernel=True):
        facts["state"] = "not_efi"
        probes.ok("secure_boot", "/sys/firmware/efi does not exist: not booted with EFI")
        return facts
    try:
        data = host.read_bytes(SECURE_BOOT_VAR, kernel=True)
    except (IOError, OSError) as exc:
        probes.error("secure_boot", "%s: %s" % (SECURE_BOOT_VAR, exc))
        return facts
    # efivarfs: 4 bytes of attributes, then the variable's 1-byte value.
    if len(data) < 5:
        probes.error("secure_boot", "%s: %d bytes, expected 5" % (SECURE_BOOT_VAR, len(data)))
        return facts
    facts["state"] = "enabled" if bytearray(data)[4] == 1 else "disabled"
    probes.ok("secure_boot", "SecureBoot efivar: %s" % facts["state"])
    return facts
