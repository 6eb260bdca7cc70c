"""Properties of the container runtime editors (containerd, k3s / RKE2, CRI-O, Docker).

For every generated file and option set, an editor either refuses with a GpuFleetError (and
nothing else: no other exception type) or plans files that the real parser reads (tomllib;
``json`` refusing NaN / Infinity), that a second run leaves as they are, and that
``state=absent`` turns back into the original bytes.
"""

from __future__ import annotations

import json
import tomllib

from hypothesis import given, note, strategies as st

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import containerd as ctd, containerd_config, k3s
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import crio
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import docker
from ansible_collections.gpufleet.nvidia.tests.property import strategies as s
from ansible_collections.gpufleet.nvidia.tests.property.tally import tally

MAIN = "/etc/containerd/config.toml"
DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"
CRIO_MAIN = "/etc/crio/crio.conf"
CRIO_DROPIN = "/etc/crio/crio.conf.d/99-nvidia.toml"
DOCKER = "/etc/docker/daemon.json"
DOCKER_STATE = "/var/lib/gpufleet.nvidia/container_runtime/docker.json"
K3S_TEMPLATE = "/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl"
K3S_GENERATED = "/var/lib/rancher/k3s/agent/etc/containerd/config.toml"

flags = st.fixed_dictionaries({"set_as_default": st.booleans()})
handler = st.sampled_from(["nvidia", "nvidia-cdi", "nvidia_legacy"])


def outputs(plan):
    return {f.path: f.after for f in plan.files}


def check_toml(plan):
    for change in plan.files:
        if change.after is not None:
            tomllib.loads(change.after)


def _refuse_constant(name):
    raise ValueError("JSON constant %s" % name)


def strict_json(text):
    return json.loads(text, parse_constant=_refuse_constant)


def _pruned(tree):
    """``tree`` without its empty tables / objects (and the tables left empty by that)."""
    if not isinstance(tree, dict):
        return tree
    out = {k: _pruned(v) for k, v in tree.items()}
    return {k: v for k, v in out.items() if v != {}}


def _data(path, text):
    if path.endswith(".json"):
        return strict_json(text) if text.strip() else {}
    return tomllib.loads(text)


def same_data(path, a, b):
    """Whether ``a`` and ``b`` hold the same settings once their empty tables are left out."""
    if a is None or b is None:
        return a is b
    same = json.dumps(_pruned(_data(path, a)), sort_keys=True, default=str) == json.dumps(_pruned(_data(path, b)), sort_keys=True, default=str)
    return same  # through JSON: a NaN equals itself there


def check_removed(target, removed, wanted, original, name):
    """``state=absent`` gives the original bytes back; the one exception, counted: the original
    configured ``name`` itself, and absent removes it, as it must."""
    if original is not None and name in original:
        return tally(target, "had the handler")
    assert removed == wanted, "%s: not the original bytes; settings %s" % (
        target, "the same" if all(same_data(p, removed.get(p), wanted.get(p)) for p in wanted) else "differ")
    tally(target, "round trip")


#: Refusals counted apart (docs/reliability.md, findings 5 and 6): the words of their messages.
REFUSALS = (
    ("defined in several places of the file", "refused: tables out of order"),
    ("does not fit the installed containerd", "refused: version the containerd does not hold"),
)


def refused(target, exc, paths):
    """A refusal must be a GpuFleetError that names the file or option it is about."""
    assert isinstance(exc, GpuFleetError), "%s: %r" % (target, exc)
    assert any(path in str(exc) for path in paths), "%s: a refusal that names no file: %s" % (target, exc)
    tally(target, next((outcome for words, outcome in REFUSALS if words in str(exc)), "refused"))


# --- containerd --------------------------------------------------------------------------------

containerd_options = st.fixed_dictionaries(
    {
        "mode": st.sampled_from(["dropin", "inplace"]),
        "runtime_name": handler,
        "set_as_default": st.booleans(),
        "enable_cdi": st.booleans(),
        "enable_cri": st.booleans(),
        "containerd_version": st.sampled_from([None, "1.6.20", "1.7.24", "2.1.9"]),
    }
)


def plan_ctd(main, dropin, **options):
    return ctd.plan_containerd(MAIN, main, dropin, containerd_config.ContainerdOptions(dropin_path=DROPIN, **options))


@given(main=s.toml_file(s.containerd_tree(), s.CONTAINERD_FIXTURES), options=containerd_options)
def test_containerd_refuses_or_round_trips(main, options):
    note(repr(main))
    try:
        plan = plan_ctd(main, None, **options)
    except Exception as exc:  # noqa: BLE001 - the property: only GpuFleetError
        return refused("containerd", exc, (MAIN, DROPIN))
    check_toml(plan)
    after = outputs(plan)
    again = plan_ctd(after[MAIN], after[DROPIN], **options)
    assert not again.changed, again.diff
    removed = plan_ctd(after[MAIN], after[DROPIN], state="absent", **options)
    check_removed("containerd", outputs(removed), {MAIN: main, DROPIN: None}, main, options["runtime_name"])


# --- k3s / RKE2 ----------------------------------------------------------------------------------


def plan_k3s(template, generated, **options):
    opts = containerd_config.ContainerdOptions(mode="inplace", **options)
    return k3s.plan_k3s("k3s", K3S_TEMPLATE, template, K3S_GENERATED, generated, opts)


@given(generated=s.toml_file(s.containerd_tree(), s.K3S_FIXTURES), options=st.fixed_dictionaries(
    {"runtime_name": handler, "set_as_default": st.booleans(), "enable_cdi": st.booleans()}))
def test_k3s_refuses_or_round_trips(generated, options):
    note(repr(generated))
    try:
        plan = plan_k3s(None, generated, **options)
    except Exception as exc:  # noqa: BLE001
        return refused("k3s", exc, (K3S_TEMPLATE, K3S_GENERATED))
    check_toml(plan)
    template = outputs(plan)[K3S_TEMPLATE]
    again = plan_k3s(template, generated, **options)
    assert not again.changed, again.diff
    removed = plan_k3s(template, generated, state="absent", **options)
    assert outputs(removed).get(K3S_TEMPLATE) is None
    tally("k3s", "round trip")


# --- CRI-O -----------------------------------------------------------------------------------------

crio_options = st.fixed_dictionaries(
    {"mode": st.sampled_from(["dropin", "inplace"]), "runtime_name": handler, "set_as_default": st.booleans()}
)


def plan_crio(main, dropin, **options):
    return crio.plan_crio(CRIO_MAIN, main, dropin, [], crio.CrioOptions(dropin_path=CRIO_DROPIN, **options))


@given(main=s.toml_file(s.crio_tree(), s.CRIO_FIXTURES), options=crio_options)
def test_crio_refuses_or_round_trips(main, options):
    note(repr(main))
    try:
        plan = plan_crio(main, None, **options)
    except Exception as exc:  # noqa: BLE001
        return refused("crio", exc, (CRIO_MAIN, CRIO_DROPIN))
    check_toml(plan)
    after = outputs(plan)
    again = plan_crio(after[CRIO_MAIN], after.get(CRIO_DROPIN), **options)
    assert not again.changed, (plan.facts.get("source_runtime"), again.facts.get("source_runtime"), again.diff)
    removed = plan_crio(after[CRIO_MAIN], after.get(CRIO_DROPIN), state="absent", **options)
    got = outputs(removed)
    got = {CRIO_MAIN: got.get(CRIO_MAIN), CRIO_DROPIN: got.get(CRIO_DROPIN)}
    check_removed("crio", got, {CRIO_MAIN: main, CRIO_DROPIN: None}, main, options["runtime_name"])


# --- Docker ------------------------------------------------------------------------------------------

docker_options = st.fixed_dictionaries({"runtime_name": handler, "set_as_default": st.booleans(), "enable_cdi": st.booleans()})


def plan_docker(text, kept=None, **options):
    """The plan of daemon.json ``text``, the module's state file holding ``kept`` (None: no file)."""
    return docker.plan_docker(DOCKER, text, docker.DockerOptions(**options), kept, DOCKER_STATE)


@given(text=s.docker_file(), options=docker_options)
def test_docker_refuses_or_round_trips(text, options):
    note(repr(text))
    try:
        plan = plan_docker(text, **options)
    except Exception as exc:  # noqa: BLE001
        return refused("docker", exc, (DOCKER,))
    after, kept = outputs(plan)[DOCKER], outputs(plan).get(DOCKER_STATE)
    if after is not None:
        strict_json(after)
    again = plan_docker(after, kept, **options)
    assert not again.changed, again.diff
    removed = outputs(plan_docker(after, kept, state="absent", **options))
    got = {DOCKER: removed.get(DOCKER), DOCKER_STATE: removed.get(DOCKER_STATE)}
    check_removed("docker", got, {DOCKER: text, DOCKER_STATE: None}, text, options["runtime_name"])
