"""Inputs of the property suite: configuration files of the container runtimes (generated
trees rendered as TOML / JSON, the captured fixtures, and both with lines spliced in), option
values, and arbitrary bytes."""

from __future__ import annotations

import json
import os

import tomlkit
from hypothesis import strategies as st

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures", "runtime-configs")


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


CONTAINERD_FIXTURES = [
    "containerd-1.6.20-default.toml",
    "containerd-1.7.24-default.toml",
    "containerd-2.1.9-default.toml",
    "debian-containerd-etc-config.toml",
    "docker-containerd.io-config.toml",
    "kubeadm-containerd-1.7-commented.toml",
]
K3S_FIXTURES = ["k3s-v1.30-config.toml", "k3s-v1.33-config.toml"]
CRIO_FIXTURES = ["crio.conf", "crio-10-crio.conf"]

# --- scalars ------------------------------------------------------------------------------------

words = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


names = st.sampled_from(["runc", "nvidia", "crun", "kata", "io.containerd.runc.v2", "a b", "", "x.y", "é", "run\tc"])
key_words = st.one_of(words, words.map(lambda word: word + "\n"))  # a final newline: finding 2, fixed
scalars = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    words,
    names,
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(names | key_words, inner, max_size=3)),
    max_leaves=8,
)
keys = st.one_of(names, key_words, st.sampled_from(["version", "imports", "disabled_plugins", "plugins", "default_runtime_name"]))

# --- containerd-shaped trees ----------------------------------------------------------------------

CRI_TABLES = {1: "cri", 2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"}


@st.composite
def runtime_table(draw):
    table = {"runtime_type": draw(st.sampled_from(["io.containerd.runc.v2", "io.containerd.runsc.v1", "oci"]) | words)}
    if draw(st.booleans()):
        table["options"] = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "BinaryName": st.sampled_from(["/usr/bin/runc", "", "runc"]) | words,
                    "SystemdCgroup": st.booleans() | scalars,
                    "Root": words,
                },
            )
        )
    if draw(st.booleans()):
        table[draw(keys)] = draw(values)
    return table


@st.composite
def containerd_tree(draw):
    version = draw(st.one_of(st.none(), st.sampled_from([1, 2, 3]), scalars))
    tree = {}
    if version is not None:
        tree["version"] = version
    number = version if version in CRI_TABLES else draw(st.sampled_from([1, 2, 3]))
    if draw(st.integers(0, 4)):
        runtimes = draw(st.dictionaries(names, runtime_table(), max_size=3))
        containerd = {"runtimes": runtimes}
        if draw(st.booleans()):
            containerd["default_runtime_name"] = draw(names)
        cri = {"containerd": containerd}
        if draw(st.booleans()):
            cri["enable_cdi"] = draw(st.booleans() | scalars)
        tree["plugins"] = {CRI_TABLES[number]: cri}
        if draw(st.booleans()):
            tree["plugins"][draw(keys)] = draw(values)
    if draw(st.booleans()):
        tree["disabled_plugins"] = draw(st.lists(st.sampled_from(["cri", "io.containerd.grpc.v1.cri"]) | words, max_size=2))
    if draw(st.booleans()):
        tree[draw(keys)] = draw(values)
    return tree


@st.composite
def crio_tree(draw):
    tree = {}
    if draw(st.integers(0, 4)):
        handler = st.fixed_dictionaries({}, optional={
            "runtime_path": words, "runtime_type": st.sampled_from(["oci", "vm"]) | words,
            "runtime_root": words, "monitor_path": words})
        runtime = {"runtimes": draw(st.dictionaries(names, handler, max_size=3))}
        if draw(st.booleans()):
            runtime["default_runtime"] = draw(names)
        tree["crio"] = {"runtime": runtime}
    if draw(st.booleans()):
        tree.setdefault("crio", {})[draw(keys)] = draw(values)
    return tree


def render_toml(tree):
    """A tree as TOML text (tomlkit), or None where tomlkit cannot write it (a key it refuses)."""
    try:
        return tomlkit.dumps(tree)
    except Exception:  # noqa: BLE001 - tomlkit refusing a generated key or value; the strategy skips it
        return None


# Lines spliced into a file: each alone may break the TOML, clash with a table, or be harmless.
SPLICES = st.one_of(
    st.sampled_from(
        [
            "", "# comment", "version = 2", "version = 3", 'version = "2"', "[plugins", "[plugins]", "plugins = 3",
            'imports = ["/etc/containerd/conf.d/*.toml"]', "imports = 1", "disabled_plugins = [\"cri\"]",
            "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]", "runtime_type = 1",
            "[crio.runtime]", "default_runtime = \"nvidia\"", "x = nan", "x = inf", "\x00", "\ufeff", "{{ template \"base\" . }}",
            "# gpufleet.nvidia.container_runtime state: {\"bad\": ", "[[plugins]]", "a = {b = 1}",
        ]
    ),
    words,
)


@st.composite
def spliced(draw, text):
    lines = text.split("\n")
    for dummy in range(draw(st.integers(1, 3))):
        lines.insert(draw(st.integers(0, len(lines))), draw(SPLICES))
    return "\n".join(lines)


def toml_file(tree_strategy, fixture_names):
    """Generated trees, the fixtures as they are, or either with lines spliced in; None: no file."""
    generated = tree_strategy.map(render_toml).filter(lambda text: text is not None)
    captured = st.sampled_from([fixture(n) for n in fixture_names]) if fixture_names else st.nothing()
    return st.one_of(
        st.none(),
        generated,
        captured,
        generated.flatmap(spliced),
        captured.flatmap(spliced),
        words,
    )


# --- JSON (Docker) ----------------------------------------------------------------------------------

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), words),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(words | names, inner, max_size=3)),
    max_leaves=8,
)


@st.composite
def docker_tree(draw):
    tree = draw(st.dictionaries(words, json_values, max_size=3))
    if draw(st.booleans()):
        tree["runtimes"] = draw(st.dictionaries(names, st.one_of(
            st.fixed_dictionaries({"path": words}, optional={"runtimeArgs": st.lists(words, max_size=2)}), json_values), max_size=2))
    if draw(st.booleans()):
        tree["default-runtime"] = draw(names | words | json_values)  # not only strings: finding 3, fixed
    if draw(st.booleans()):
        # features.cdi among them (true, false, other values): finding 3, fixed
        tree["features"] = draw(st.dictionaries(st.sampled_from(["buildkit", "cdi", "x"]), st.booleans() | json_values, max_size=2))
    return tree


@st.composite
def docker_file(draw):
    tree = draw(docker_tree())
    indent = draw(st.sampled_from([None, 2, 4, "\t"]))
    text = json.dumps(tree, indent=indent, ensure_ascii=draw(st.booleans()))
    if draw(st.booleans()):
        text += "\n"
    return draw(st.one_of(st.just(text), st.none(), spliced(text), words, st.just(fixture("docker-daemon.json"))))


# --- any bytes, as the host's reader decodes them ---------------------------------------------------------

def any_text(samples=()):
    raw = st.binary(max_size=400).map(lambda b: b.decode("utf-8", "replace"))
    pieces = st.lists(st.one_of(words, st.sampled_from(list(samples) + ["\n", "=", "\"", "'", "\n\n", "#", "<", ">", "/"])), max_size=30)
    return st.one_of(raw, st.text(max_size=200), pieces.map("".join))


HOST = os.path.join(ROOT, "tests", "unit", "fixtures", "hosts", "debian12-l40s-x2-package")


def host_capture(relative):
    """A captured file of the test host, as bytes."""
    with open(os.path.join(HOST, relative), "rb") as handle:
        return handle.read()


@st.composite
def mutated(draw, data):
    """``data`` with up to four slices replaced by random bytes (a cut file, a stray byte, garbage)."""
    data = bytearray(data)
    for dummy in range(draw(st.integers(0, 4))):
        start = draw(st.integers(0, len(data)))
        end = draw(st.integers(start, min(len(data), start + 40)))
        data[start:end] = draw(st.binary(max_size=12))
    return bytes(data)


def captured_text(relative, samples=()):
    """The capture, mutated, or any text; decoded as the host adapter decodes (``read_text``)."""
    data = host_capture(relative)
    return st.one_of(mutated(data).map(lambda b: b.decode("utf-8", "replace")), any_text(samples))
