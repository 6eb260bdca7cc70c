"""The fleet report's page in a real browser: headless Chromium (Debian's ``chromium``) at 1,280 px,
on the example fleet at 8 nodes and at 1,000, with screenshots kept under tests/output/report-page/.

A copy of each page gets a few lines of script that measure it once laid out (every word of a
node's line and of its folded details fits its column, the page is no wider than the window) and
write the result into the page, which ``--dump-dom`` prints. Skipped, saying why, where chromium
is not installed (scripts/setup-host.sh installs it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time

import pytest

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils.report import html as H
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.plugin_utils.report import example_fleet as T
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.plugin_utils.report.example_fleet import fleet

OUT = os.path.join(T.ROOT, "tests", "output", "report-page")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTH = 1280

# What the browser measures once the page has loaded: the words of every visible cell against its
# width, the page's width, the time from navigation to DOMContentLoaded and to the load event.
CHECK = """<script>//<![CDATA[
window.addEventListener('load', function () { setTimeout(function () {
  var nav = performance.getEntriesByType('navigation')[0], parsed = nav.domContentLoadedEventEnd;
  var ctx = document.createElement('canvas').getContext('2d'), bad = [], cells = 0;
  Array.prototype.slice.call(document.querySelectorAll('details.node')).slice(0, 60).forEach(function (d) { d.open = true; });
  document.querySelectorAll('.head span, details.node > summary > span, table.facts th, table.facts td, .card .l').forEach(function (el) {
    if (el.offsetParent === null) { return; }
    cells += 1;
    var st = getComputedStyle(el), width = el.clientWidth - parseFloat(st.paddingLeft) - parseFloat(st.paddingRight);
    ctx.font = st.fontWeight + ' ' + st.fontSize + ' ' + st.fontFamily;
    var whole = el.classList.contains('host') || el.querySelector('.badge');
    var words = whole ? [el.textContent.trim()] : el.textContent.split(/\\s+/);
    words.forEach(function (w) {
      var need = w ? ctx.measureText(w).width : 0;
      if (el.querySelector('.badge')) { need = el.querySelector('.badge').offsetWidth; }
      if (need > width + 1) { bad.push([el.tagName + '.' + el.className, w, Math.round(width), Math.round(need)]); }
    });
  });
  // the search and a filter, as a reader uses them
  var q = document.getElementById('q'), status = document.querySelector('select[data-f=status]');
  q.value = 'L40S'; q.dispatchEvent(new Event('input'));
  var searched = document.getElementById('shown').textContent;
  q.value = ''; status.value = 'drift'; status.dispatchEvent(new Event('change'));
  var filtered = document.getElementById('shown').textContent;
  var groups = Array.prototype.filter.call(document.querySelectorAll('details.group'), function (g) { return !g.hidden; }).length;
  status.value = ''; status.dispatchEvent(new Event('change'));
  var pre = document.createElement('pre');
  pre.id = 'layout-check';
  pre.textContent = JSON.stringify({cells: cells, narrow: bad.slice(0, 20), narrow_count: bad.length,
    page_width: document.documentElement.scrollWidth, parsed_ms: Math.round(parsed), load_ms: Math.round(nav.loadEventEnd || nav.loadEventStart),
    measured_ms: Math.round(performance.now()),
    nodes: document.querySelectorAll('details.node').length, searched: +searched, filtered: +filtered, groups_shown: groups});
  document.body.appendChild(pre);
}, 0); });
//]]></script>"""


def _chromium(*args, timeout=120):
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=%d,1000" % WIDTH] + list(args)
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; scripts/setup-host.sh)")
@pytest.mark.parametrize("size", [8, 1000])
def test_the_page_in_a_real_browser(size):
    os.makedirs(OUT, exist_ok=True)
    report = fleet(size)
    page = H.render_html(report)
    path = os.path.join(OUT, "fleet-%d.html" % size)
    with open(path, "w") as handle:
        handle.write(page)
    with open(path.replace(".html", "-check.html"), "w") as handle:
        handle.write(page.replace("</body>", CHECK + "\n</body>"))
    started = time.monotonic()
    shot = _chromium("--screenshot=%s" % path.replace(".html", ".png"), "--window-size=%d,2200" % WIDTH, "file://" + path)
    seconds = time.monotonic() - started
    # the copy that measures opens the first 60 nodes' details: its screenshot shows them folded out
    _chromium("--screenshot=%s" % path.replace(".html", "-open.png"), "--window-size=%d,2600" % WIDTH,
              "file://" + path.replace(".html", "-check.html"))
    dom = _chromium("--virtual-time-budget=3000", "--dump-dom", "file://" + path.replace(".html", "-check.html")).stdout
    found = re.search(r'<pre id="layout-check">(.*?)</pre>', dom, re.S)
    assert shot.returncode == 0 and found, shot.stderr[-2000:]
    check = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))
    check.update(size_bytes=len(page.encode("utf-8")), screenshot_s=round(seconds, 2))
    with open(path.replace(".html", "-check.json"), "w") as handle:
        json.dump(check, handle, indent=2)
    assert check["nodes"] == size and check["cells"] > 8 * 8
    assert check["narrow"] == [], "columns narrower than their words: %s" % check["narrow"]
    assert check["page_width"] <= WIDTH
    drifted = len([r for r in report["nodes"] if r["status"] == "drift"])
    assert (check["searched"], check["filtered"], check["groups_shown"]) == (drifted, drifted, 1)  # L40S: the drifted ones
    assert check["size_bytes"] < size * 2200 + 60000  # 1,000 nodes well under the old page's 1.45 MB
