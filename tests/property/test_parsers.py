"""Properties of gpu_facts' parsers: any bytes (as the host adapter decodes them) give a result,
or the one exception type whose caller turns it into a probe state; never another exception."""

from __future__ import annotations

from hypothesis import given, strategies as st

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import toml_subset
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.container import parse_containerd_config
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.machine import parse_os_release
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.nvidia_smi import parse_nvidia_smi_xml
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.packages import parse_dpkg_status
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.pci import parse_pci_ids
from ansible_collections.gpufleet.nvidia.plugins.module_utils.discovery.topology import parse_topo_matrix
from ansible_collections.gpufleet.nvidia.tests.property import strategies as s
from ansible_collections.gpufleet.nvidia.tests.property.tally import tally

OS_RELEASE = ["ID=debian", "ID_LIKE=\"rhel fedora\"", "VERSION_ID=\"12\"", "PRETTY_NAME='x'", "# c", "NAME"]
PCI_IDS = ["\n10de  NVIDIA Corporation\n", "\t2335  GH100 [H200 SXM 141GB]\n", "\t\t10de 18be  sub\n", "10df  Other\n", "\tzzzz  x\n"]
DPKG = ["Package: nvidia-driver\n", "Status: install ok installed\n", "Version: 550.54.15-1\n", "\n\n", " continued\n"]
XML = ["<?xml version=\"1.0\" ?>", "<nvidia_smi_log>", "</nvidia_smi_log>", "<gpu id=\"00000000:01:00.0\">", "</gpu>",
       "<driver_version>550.54</driver_version>", "<cuda_version>12.4</cuda_version>", "<attached_gpus>1</attached_gpus>",
       "<product_name>H200</product_name>", "<mig_mode><current_mig>Enabled</current_mig></mig_mode>", "<!DOCTYPE x>"]
TOML = ["version = 2", "[plugins]", "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]",
        "imports = [\"a\"]", "disabled_plugins = [", "]", "[[x]]", "a = {b = [1, 2]}", "x = '''", "[" * 40]
TOPO = ["\tGPU0\tGPU1\tCPU Affinity\n", "GPU0\t X \tNV18\t0-63\n", "GPU1\tNV18\t X \t0-63\n", "Legend:\n"]


def survives(target, parse, text, allowed=()):
    try:
        parse(text)
    except allowed:
        return tally(target, "probe state")
    tally(target, "result")


@given(text=s.captured_text("root/etc/os-release", OS_RELEASE))
def test_os_release(text):
    survives("os-release", parse_os_release, text)


PCI_CAPTURE = s.host_capture("root/usr/share/misc/pci.ids")


@given(data=st.one_of(st.binary(max_size=400), s.mutated(PCI_CAPTURE),
                      s.any_text(PCI_IDS).map(lambda t: t.encode("utf-8", "surrogatepass"))))
def test_pci_ids(data):
    survives("pci.ids", parse_pci_ids, data)  # load_pci_ids gives it the (gunzipped) bytes


@given(text=s.captured_text("root/var/lib/dpkg/status", DPKG))
def test_dpkg_status(text):
    survives("dpkg status", parse_dpkg_status, text)


@given(text=s.captured_text("commands/nvidia-smi-q-x.txt", XML))
def test_nvidia_smi_xml(text):
    survives("nvidia-smi XML", parse_nvidia_smi_xml, text, ValueError)


CONFIGS = st.one_of(s.toml_file(s.containerd_tree(), s.CONTAINERD_FIXTURES).filter(lambda t: t is not None), s.any_text(TOML))


@given(text=CONFIGS)
def test_containerd_config(text):
    survives("containerd config.toml", parse_containerd_config, text, (ValueError, RecursionError))


@given(text=CONFIGS)
def test_toml_subset(text):
    survives("toml_subset", toml_subset.parse_subset, text, (ValueError, RecursionError))


@given(text=s.captured_text("commands/nvidia-smi-topo-m.txt", TOPO))
def test_topo_matrix(text):
    survives("nvidia-smi topo", parse_topo_matrix, text, ValueError)
