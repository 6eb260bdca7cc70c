"""Tests of module_utils/common/toml_subset.py: TOML read with the Python's library, or without one.

The subset reader is held to tomllib on every TOML file of ``tests/unit/fixtures/runtime-configs``
and on what a real ``containerd config dump`` prints (where a containerd is on this machine).
"""

from __future__ import annotations

import glob
import os
import subprocess

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import toml_subset as T
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils.runtime.configs import (
    CTK,
    RUNTIME,
    _containerd_binaries,
    _read,
)

try:
    import tomllib
except ImportError:  # pragma: no cover
    tomllib = None


TOML_FIXTURES = sorted(
    glob.glob(os.path.join(RUNTIME, "*.toml")) + glob.glob(os.path.join(RUNTIME, "*.conf")) + glob.glob(os.path.join(CTK, "*", "*.toml"))
)


@pytest.mark.skipif(tomllib is None, reason="needs Python 3.11's tomllib to compare with")
@pytest.mark.parametrize("path", TOML_FIXTURES, ids=lambda p: os.path.relpath(p, RUNTIME))
def test_toml_subset_reader_agrees_with_tomllib(path):
    text = _read(path)
    assert T.parse_subset(text) == tomllib.loads(text)


@pytest.mark.skipif(tomllib is None, reason="needs Python 3.11's tomllib to compare with")
@pytest.mark.parametrize("binary", _containerd_binaries())
def test_toml_subset_reader_reads_a_real_config_dump(tmp_path, binary):
    config = tmp_path / "config.toml"
    config.write_text(_read(os.path.join(RUNTIME, "debian-containerd-etc-config.toml")))
    dump = subprocess.run([binary, "--config", str(config), "config", "dump"], stdout=subprocess.PIPE, check=True).stdout.decode()
    assert T.parse_subset(dump) == tomllib.loads(dump)


@pytest.mark.parametrize("text", ["a = \n", "[a\n", "x = [1, 2\n", 'a = "x"\na.b = 1\n'])
def test_toml_subset_reader_refuses_what_it_cannot_read(text):
    with pytest.raises(ValueError):
        T.parse_subset(text)


# --- the reader's steps ---------------------------------------------------------------------------


def test_loads_reads_with_the_library_where_there_is_one(monkeypatch):
    text = 'a = 1\n[t]\nb = "x"\n'
    assert T.loads(text) == {"a": 1, "t": {"b": "x"}}
    monkeypatch.setattr(T, "tomllib", None)
    assert T.loads(text) == {"a": 1, "t": {"b": "x"}}
    with pytest.raises(ValueError, match="^line 1: bad value"):
        T.loads("a = nope\n")


def test_statements_strip_comments_and_join_multi_line_arrays():
    text = '# top\nx = 1  # one\n\nys = [\n  "a",  # first\n  "b#c",\n]\n[t] # table\n'
    assert list(T._statements(text)) == [(2, "x = 1"), (7, 'ys = [ "a", "b#c", ]'), (8, "[t]")]
    with pytest.raises(ValueError, match="^unterminated array$"):
        list(T._statements("x = [\n 1,\n"))


@pytest.mark.parametrize("line, opens", [
    ("x = [", True), ("x = [1,", True), ("x = [1]", False), ("x = 1", False), ("[t]", False), ("[[t]]", False), ("", False),
])
def test_opens_array(line, opens):
    assert T._opens_array(line) is opens


def test_tables_arrays_of_tables_and_dotted_keys():
    text = (
        '[a."b.c"]\nx = 1\n[[servers]]\nname = "one"\n[[servers]]\nname = \'two\'\n'
        '[servers.extra]\ny = true\n[d]\ne.f = 1.5\ng = {h = 1, "i.j" = "k"}\n'
    )
    assert T.parse_subset(text) == {
        "a": {"b.c": {"x": 1}},
        "servers": [{"name": "one"}, {"name": "two", "extra": {"y": True}}],
        "d": {"e": {"f": 1.5}, "g": {"h": 1, "i.j": "k"}},
    }


@pytest.mark.parametrize("text, message", [
    ("a = 1\n[a]\n", "line 2: table a redefines a value"),
    ("a = 1\n[[a]]\n", "line 2: array of tables a redefines a value"),
    ("a b = 1\n", "line 1: bad key 'a b '"),
    ("just words\n", "line 1: expected 'key = value'"),
    ("a = 1_000\nb = 1e3\nc = nope\n", "line 3: bad value 'nope'"),
])
def test_what_the_reader_cannot_read_names_its_line(text, message):
    with pytest.raises(ValueError) as info:
        T.parse_subset(text)
    assert str(info.value) == message


def test_scalars():
    assert T._scalar(' "a\\"b" ') == 'a"b'
    assert T._scalar("'raw\\n'") == "raw\\n"
    assert T._scalar("[1, 'x', \"y,z\", ]") == [1, "x", "y,z"]
    assert T._scalar("[ ]") == []
    assert T._scalar("{a.b = 2}") == {"a": {"b": 2}}
    assert (T._scalar("1_000"), T._scalar("-2.5"), T._scalar("false")) == (1000, -2.5, False)
