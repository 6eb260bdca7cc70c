"""The toolkit_apt tests' fake Debian node: ``FakeApt``, ``converge``, ``converged``, ``params`` and the repository.

``FakeApt`` keeps the node's files and dpkg database in memory and answers the commands the
module runs (dpkg-query in DPKG_QUERY's format, apt-get update / install, apt-mark) the way
Debian's tools do; the dpkg-query lines follow the output of dpkg 1.21 on Debian 12 (status
abbreviations ``ii`` / ``hi``, unknown packages on stderr with rc 1).
"""

from __future__ import annotations

import time

from ansible_collections.gpufleet.nvidia.plugins.module_utils.runtime import toolkit_apt as T

KEY = "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmDMEZabc\n-----END PGP PUBLIC KEY BLOCK-----\n"
URL = "http://127.0.0.1:8088/stable/deb/$(ARCH)"
KEY_URL = "http://127.0.0.1:8088/gpgkey"


class FakeApt(object):
    def __init__(self, packages=None, files=None, lists_age=60.0, key=KEY, fail=None):
        self.packages = dict(packages or {})  # name -> (version, held)
        self.files = dict(files or {})
        self.age = lists_age
        self.key = key
        self.fail = fail or {}
        self.calls = []
        self.fetched = []

    def run(self, argv, environ_update=None):
        self.calls.append(list(argv))
        verb = argv[0] if argv[0] != "apt-get" else "apt-get " + argv[1]
        if verb in self.fail:
            return self.fail[verb]
        if argv[0] == "dpkg-query":
            out, err = [], []
            for name in argv[4:]:
                if name in self.packages:
                    version, held = self.packages[name]
                    out.append("%s\t%s\t%s \n" % (name, version, "hi" if held else "ii"))
                else:
                    err.append("dpkg-query: no packages found matching %s\n" % name)
            return (1 if err else 0), "".join(out), "".join(err)
        if verb == "apt-get update":
            self.age = 0.0
            return 0, "Reading package lists...\n", ""
        if verb == "apt-get install":
            for spec in argv[len(T.APT_GET_INSTALL):]:
                name, _sep, version = spec.partition("=")
                # what apt moves under --allow-change-held-packages loses its hold (dpkg's
                # selection goes back to install), as apt 2.6 on Debian 12 does
                self.packages[name] = (version or "1.0-1", False)
            return 0, "", ""
        if argv[0] == "apt-mark":
            for name in argv[2:]:
                self.packages[name] = (self.packages[name][0], argv[1] == "hold")
            return 0, "%s set on hold.\n" % argv[2], ""
        raise AssertionError("unexpected command %r" % argv)

    def read_bytes(self, path):
        if self.files.get(path) is None:
            raise FileNotFoundError(path)
        return self.files[path].encode("utf-8")

    def write(self, path, text):
        self.files[path] = text

    def remove(self, path):
        self.files.pop(path, None)

    def fetch(self, url):
        self.fetched.append(url)
        return self.key

    def glob(self, pattern):
        """apt's lists: one file, ``age`` seconds old (none when ``age`` is None)."""
        return [T.LISTS_DIR + "/deb_dists_Packages"] if self.age is not None and pattern == T.LISTS_DIR + "/*" else []

    def mtime(self, path):
        return time.time() - self.age


def converge(system, parameters, **kwargs):
    """toolkit_apt.converge on the fake node, the key downloaded from the fake's server."""
    return T.converge(system, parameters, fetch=system.fetch, **kwargs)


def params(**extra):
    base = dict(version="1.17.8", packages=list(T.PACKAGES), extra_packages=["python3-tomlkit"], hold=True,
                repo_manage=True, repo_url=URL, repo_key_url=KEY_URL, repo_key="", repo_key_refresh=False,
                keyring=T.KEYRING, source_file=T.SOURCE_FILE, pin_file=T.PIN_FILE, update_cache=False,
                cache_valid_time=3600)
    base.update(extra)
    return base


def converged(version="1.17.8-1", held=True):
    return FakeApt(
        packages=dict([(n, (version, held)) for n in T.PACKAGES] + [("python3-tomlkit", ("0.11.7-1", False))]),
        files={T.KEYRING: KEY, T.SOURCE_FILE: T.render_source(URL, T.KEYRING, KEY_URL), T.PIN_FILE: T.render_pin(T.PACKAGES, version)},
    )
