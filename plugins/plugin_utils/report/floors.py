# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report's security floors: each node's driver, toolkit and containerd judged by
``common/security.py`` on the report's date, and the fleet's bulletins with the nodes below them.

The report (``report/fleet.py``) puts :func:`row_security` in each row and :func:`fleet_security`
in the report, and prints them with :func:`row_lines` and :func:`fleet_lines`; every line names
the bulletin and the version that fixes it.
"""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils.common import security
from ansible_collections.gpufleet.nvidia.plugins.module_utils.common.data import dig


def row_security(driver, toolkit, facts, hv, today):
    """``security.judge`` of a row's installed (else loaded, else declared) driver, its installed
    toolkit and containerd; the pairing with the inventory's ``discover_kubernetes_version``."""
    containerd = dig(facts, "container", "containerd") or {}
    return security.judge(
        driver=driver.get("installed") or driver.get("loaded") or driver.get("declared"),
        toolkit=toolkit.get("installed"),
        containerd=containerd.get("version") if containerd.get("installed") else None,
        kubernetes=hv.get("discover_kubernetes_version") or None,
        today=today,
    )


def fleet_security(rows):
    """The fleet's bulletins, each once with what it is, where it was read and the hosts below it."""
    grouped = {}
    for row in rows:
        for bulletin in (row.get("security") or {}).get("bulletins") or []:
            title, published, url = security.BULLETINS[bulletin]
            item = grouped.setdefault(bulletin, {"bulletin": bulletin, "msg": title, "published": published,
                                                 "source": url, "hosts": []})
            item["hosts"].append(row["host"])
    return [grouped[b] for b in security.BULLETINS if b in grouped]


def row_lines(judged):
    """A row's findings, one line each: ``below: <what, bulletin, fixing version>``."""
    return [finding["text"] for finding in (judged or {}).get("findings") or []]


def row_short_lines(judged):
    """A row's findings in a few words each (the page's node details; the fleet's section says each bulletin in full):
    ``driver 580.159.04 - nvidia-5861, fixed in 580.178.04``."""
    return ["%s %s - %s%s" % (f["component"], f["version"], ", ".join(f["bulletins"]), ", fixed in %s" % f["fixed"] if f.get("fixed") else "")
            for f in (judged or {}).get("findings") or []]


def fleet_lines(report, most=20):
    """The fleet's bulletins as lines: ``<bulletin> (<hosts>)``, the first ``most`` hosts and how many more."""
    return ["%s, published %s (%s)" % (item["msg"], item["published"], hosts_text(item["hosts"], most))
            for item in report.get("security") or []]


def hosts_text(hosts, most=20):
    """``a, b, c`` - the first ``most`` hosts, then ``and 980 more``."""
    hosts = list(hosts)
    return ", ".join(hosts[:most]) + (" and %d more" % (len(hosts) - most) if len(hosts) > most else "")
