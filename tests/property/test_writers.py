"""Properties of the apt / dnf writers: a value the validators accept (common/inputs.py) gives a
file of exactly the lines one entry makes (nothing injected); any other value is refused with a
GpuFleetError that names the option, never another exception."""

from __future__ import annotations

from hypothesis import given, strategies as st

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import inputs
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.errors import GpuFleetError
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver import dnf
from ansible_collections.gpufleet.nvidia.plugins.module_utils.driver.apt_holds import render_pin, render_unattended
from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import toolkit_apt
from ansible_collections.gpufleet.nvidia.tests.property.tally import tally

# Anything: printable ASCII, separators that would add a line / option / stanza, and any text.
HOSTILE = st.sampled_from(["\n", "\r", " ", "\t", ",", "[", "]", "#", ";", "\"", "$", "\x00", "\x85", "\u2028", "="])
text = st.one_of(
    st.text(st.characters(codec="ascii", categories=("L", "N", "P", "S")), min_size=1, max_size=20),
    st.lists(st.one_of(st.text(st.characters(codec="ascii", categories=("L", "N")), max_size=6), HOSTILE), max_size=8).map("".join),
    st.text(max_size=20),
)
package = st.one_of(st.from_regex(r"[a-z0-9][a-z0-9+.-]{1,20}", fullmatch=True), text)
deb_version = st.one_of(st.from_regex(r"([0-9]:)?[0-9][A-Za-z0-9.+~]{0,10}(-[A-Za-z0-9.+~]{1,5})?", fullmatch=True), text)
version = st.one_of(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9.+~:_-]{0,12}", fullmatch=True), text)
url = st.one_of(st.from_regex(r"https?://[a-z0-9.-]{1,12}(/[A-Za-z0-9._~%-]{0,8}){0,3}", fullmatch=True), text)
path = st.one_of(st.from_regex(r"(/[A-Za-z0-9._-]{1,8}){1,3}", fullmatch=True), text)
repo_id = st.one_of(st.from_regex(r"[A-Za-z0-9_.:-]{1,16}", fullmatch=True), text)


def accepted(validator, *values):
    try:
        for value in values:
            validator(value)
    except inputs.Invalid:
        return False
    return True


def lines(content):
    return content.splitlines()


def outcome(target, render, valid, *args):
    try:
        content = render(*args)
    except Exception as exc:  # noqa: BLE001 - the property: only GpuFleetError
        assert isinstance(exc, GpuFleetError), repr(exc)
        assert not valid, "refused a valid value: %s" % exc
        tally(target, "refused")
        return None
    assert valid, "accepted an invalid value: %r" % (args,)
    assert "\r" not in content and "\x00" not in content
    tally(target, "written")
    return content


@given(url=url, keyring=path, origin=st.one_of(st.none(), st.just("repo_key"), url))
def test_toolkit_source(url, keyring, origin):
    valid = accepted(inputs.url, url) and accepted(inputs.keyring, keyring) and (
        not origin or origin == "repo_key" or accepted(inputs.url, origin))  # no origin: no comment
    content = outcome("toolkit_apt source", toolkit_apt.render_source, valid, url, keyring, origin)
    if content is not None:
        assert len(lines(content)) == 2 and lines(content)[1].split() == ["deb", "[signed-by=%s]" % keyring, url, "/"]


@given(packages=st.lists(package, min_size=1, max_size=4), version=deb_version)
def test_toolkit_pin(packages, version):
    valid = accepted(inputs.debian_package, *packages) and accepted(inputs.debian_version, version)
    content = outcome("toolkit_apt pin", toolkit_apt.render_pin, valid, packages, version)
    if content is not None:
        assert len(lines(content)) == 4
        assert lines(content)[1].split() == ["Package:"] + packages


@given(packages=st.dictionaries(package, deb_version, min_size=1, max_size=4), version=version,
       flavor=st.sampled_from(["open", "proprietary"]) | text)
def test_driver_apt_pin(packages, version, flavor):
    valid = (accepted(inputs.debian_package, *packages) and accepted(inputs.debian_version, *packages.values())
             and accepted(inputs.version, version) and flavor in ("open", "proprietary"))
    content = outcome("driver apt pin", render_pin, valid, packages, version, flavor)
    if content is not None:
        stanzas = content.split("\n\n")
        assert len(stanzas) == len(set(packages.values()))
        assert all(len(lines(stanza)) == 4 for stanza in stanzas)
        assert sorted(sum((lines(stanza)[1].split()[1:] for stanza in stanzas), [])) == sorted(packages)


@given(names=st.lists(package, min_size=1, max_size=4, unique=True), version=version)
def test_driver_apt_unattended(names, version):
    valid = accepted(inputs.debian_package, *names) and accepted(inputs.version, version)
    content = outcome("driver apt unattended", render_unattended, valid, names, version)
    if content is not None:
        assert len(lines(content)) == 4 + len(names) + 1


@given(repo_id=repo_id, baseurl=url)
def test_dnf_repo(repo_id, baseurl):
    valid = accepted(dnf._repo_id, repo_id) and accepted(dnf.BASEURL, baseurl)
    content = outcome("driver dnf repo", dnf.render_repo, valid, repo_id, baseurl)
    if content is not None:
        assert len(lines(content)) == 7
        assert lines(content)[1] == "[%s]" % repo_id and lines(content)[3] == "baseurl=%s" % baseurl
