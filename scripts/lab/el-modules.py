"""The stand-in CUDA repository's module metadata (modules.yaml, modulemd v2), on stdout.

One ``nvidia-driver`` module: per branch of the versions given, the streams ``<branch>-dkms``
(kmod-nvidia-latest-dkms) and ``<branch>-open`` (kmod-nvidia-open-dkms), and the virtual
streams ``latest-dkms`` and ``open-dkms`` holding every version; profiles default, fm, ks and src
(the layout of NVIDIA's CUDA repository for RHEL 8 and 9: see build-fake-el-repos.sh for the
sources). Each stream's artifacts are the NEVRAs of its packages in the repository.

    el-modules.py DIST VERSION...
"""

import sys

COMMON = ["nvidia-driver-cuda", "nvidia-driver-cuda-libs", "nvidia-kmod-common", "nvidia-modprobe",
          "nvidia-persistenced"]
KMOD = {"dkms": "kmod-nvidia-latest-dkms", "open": "kmod-nvidia-open-dkms"}


def stream(name, versions, kmod, dist, modversion):
    rpms = sorted("%s-3:%s-1.%s.x86_64" % (n, v, dist) for v in versions for n in COMMON + [kmod])
    profile = ["nvidia-driver-cuda", kmod]
    lines = [
        "---",
        "document: modulemd",
        "version: 2",
        "data:",
        "  name: nvidia-driver",
        "  stream: \"%s\"" % name,
        "  version: %d" % modversion,
        "  context: \"00000000\"",
        "  arch: x86_64",
        "  summary: Nvidia driver for %s branch" % name,
        "  description: >-",
        "    Test double of NVIDIA's nvidia-driver module stream %s (gpufleet.nvidia tests)." % name,
        "  license:",
        "    module:",
        "    - MIT",
        "  profiles:",
    ]
    for profile_name in ("default", "fm", "ks", "src"):
        lines += ["    %s:" % profile_name, "      rpms:"] + ["      - %s" % n for n in profile]
    lines += ["  artifacts:", "    rpms:"] + ["    - %s" % r for r in rpms]
    return "\n".join(lines) + "\n...\n"


def main(argv):
    dist = argv[1]
    versions = argv[2:]
    branches = sorted(set(v.split(".")[0] for v in versions), key=int)
    out = []
    modversion = 90000
    for branch in branches:
        mine = [v for v in versions if v.split(".")[0] == branch]
        for suffix, kmod in sorted(KMOD.items()):
            modversion += 1
            out.append(stream("%s-%s" % (branch, suffix), mine, kmod, dist, modversion))
    out.append(stream("latest-dkms", versions, KMOD["dkms"], dist, modversion + 1))
    out.append(stream("open-dkms", versions, KMOD["open"], dist, modversion + 2))
    sys.stdout.write("".join(out))


if __name__ == "__main__":
    main(sys.argv)
