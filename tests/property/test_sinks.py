"""Properties of the sinks of issue 29: a value a validator accepts reaches the udev rule, helm's argv, a
a JSON reader or the terminal without changing what they read; any other value is refused with a
GpuFleetError (an ``inputs.Invalid`` from the validators alone), never another exception."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import given, strategies as st

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import inputs
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import fleet as report
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import text as report_text
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import dev_char, files
from ansible_collections.gpufleet.nvidia.tests.property.tally import tally

HOSTILE = st.sampled_from(["\n", "\r", " ", "\t", '"', "\\", "$", "%", "-", "--", "..", "/", "\x1b", "\x9b", "\x00",
                           "\x85", "\u2028", "\u202e", "=", ","])
text = st.one_of(
    st.lists(st.one_of(st.text(st.characters(codec="ascii", categories=("L", "N")), max_size=6), HOSTILE), max_size=10).map("".join),
    st.text(max_size=24),
)
path = st.one_of(st.from_regex(r"(/[A-Za-z0-9._-]{1,8}){1,3}", fullmatch=True), text)
UDEV_RULE = re.compile(r'ACTION=="add", DEVPATH=="/bus/pci/drivers/nvidia", RUN\+="(/[!#&-\[\]-~]+) system '
                       r'create-dev-char-symlinks --create-all"')


def refused_or(target, call):
    try:
        value = call()
    except Exception as exc:  # noqa: BLE001 - the property: only GpuFleetError / Invalid
        assert isinstance(exc, (GpuFleetError, inputs.Invalid)), repr(exc)
        tally(target, "refused")
        return None
    tally(target, "accepted")
    return value


@given(ctk=st.one_of(st.from_regex(r"(/[A-Za-z0-9._-]{1,8}){1,3}", fullmatch=True), path),
       rule=st.one_of(st.from_regex(r"(/[A-Za-z0-9._-]{1,8}){1,3}\.rules", fullmatch=True), path))
def test_udev_rule(ctk, rule):
    params = {"nvidia_ctk_path": ctk, "rule_path": rule}
    if refused_or("udev rule", lambda: inputs.check("dev_char_symlinks", dev_char.PARAM_RULES, params)) is None:
        return
    lines = dev_char.rule_text(ctk).splitlines()
    rules = [line for line in lines if not line.startswith("#")]
    assert len(lines) == 4 and len(rules) == 1 and UDEV_RULE.fullmatch(rules[0]).group(1) == ctk
    assert rule.endswith(".rules") and rule.startswith("/") and "\n" not in rule


@given(name=st.one_of(st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,60}[a-z0-9])?", fullmatch=True), text),
       chart=st.one_of(st.from_regex(r"(oci://)?[a-z0-9/._-]{1,30}", fullmatch=True), text), chart_path=path)
def test_helm_argv(name, chart, chart_path):
    for target, validator, value in (("helm release name", inputs.release_name, name), ("helm chart ref", inputs.chart_ref, chart),
                                     ("helm chart path", inputs.chart_path, chart_path)):
        accepted = refused_or(target, lambda: validator(value))
        if accepted is None or accepted == "":
            continue
        # one argument that helm reads as a positional, never as an option or two arguments
        assert not accepted.startswith("-") and not inputs.unsafe(accepted) and accepted == value
        if validator is inputs.release_name:  # helm's own rule for a release name
            assert len(name) <= 53 and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", name)


@given(host=text, reason=text)
def test_report_text(host, reason):
    hv = {host: {"gpufleet_nvidia_validation": {"status": "failed", "gpu_count": 1, "failed": [reason], "checks": []}}}
    out = refused_or("report text", lambda: report_text.render_text(report.build_report([host], hv)))
    if out is not None:
        assert not any(ch != "\n" and unicodedata.category(ch) in ("Cc", "Cf") for ch in out)


@given(text=st.one_of(text, st.from_regex(r'\{"a": -?[0-9]{1,3}(\.[0-9])?e[0-9]{1,4}\}', fullmatch=True),
                      st.integers(0, 200).map(lambda n: '{"a": ' + "[" * n + "]" * n + "}")))
def test_json_reader(text):
    value = refused_or("daemon.json reader", lambda: files.parse_json(text, "/etc/docker/daemon.json"))
    if value is not None:
        assert isinstance(value, dict)
