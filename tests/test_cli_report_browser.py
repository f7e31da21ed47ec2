"""``report.html`` of ``bayescal evaluate`` rendered in a real browser (issue 21, item 3).

Headless Chromium (Debian's ``chromium`` package; the CI machine has /usr/bin/chromium)
opens the report from disk with the network unreachable (``--proxy-server`` pointing
nowhere: a report that fetched anything would miss it). The DOM after load must hold
the tables and every figure decoded with its natural size (a probe script is added to
a copy of the page: the report itself has none), and a screenshot must show the
figures (matplotlib's default blue, #1f77b4, in many pixels) and text.
"""

import json
import os
import re
import shutil
import subprocess

import matplotlib.image
import numpy as np
import pytest

from bayescal.cli import main
from tests.test_cli_loo import _tree, _write

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="needs headless Chromium (apt-get install chromium)"
)

_PROBE = """<script>
window.addEventListener("load", function () {
  var sizes = [];
  document.querySelectorAll("img").forEach(function (im) {
    sizes.push([im.naturalWidth, im.naturalHeight, im.complete]);
  });
  var tables = [];
  document.querySelectorAll("table").forEach(function (t) {
    tables.push([t.rows.length, t.getBoundingClientRect().height]);
  });
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify({images: sizes, tables: tables});
  document.body.appendChild(pre);
});
</script>"""


def _chromium(*args, timeout=120):
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
           "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>", *args]
    env = dict(os.environ, HOME=os.environ.get("HOME", "/tmp"))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    path = _write(_tree(n=60), tmp / "m.nc")
    assert main(["evaluate", str(path), "--out", str(tmp / "o"), "--recalibrate",
                 "isotonic"]) == 0
    return tmp / "o"


def test_tables_and_figures_render_in_chromium(report, tmp_path):
    page = (report / "report.html").read_text()
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", _PROBE + "</body>"))
    res = _chromium("--virtual-time-budget=10000", "--dump-dom", probe.as_uri())
    m = re.search(r'<pre id="probe">([^<]*)</pre>', res.stdout)
    assert m, (res.returncode, res.stderr[-2000:])
    seen = json.loads(m.group(1).replace("&quot;", '"'))
    plots = json.loads((report / "report.json").read_text())["plots"]
    assert len(seen["images"]) == len(plots) == 5
    for width, height, complete in seen["images"]:
        assert complete and width > 300 and height > 300  # decoded PNGs, not broken icons
    # metrics + coverage, for the PIT and the LOO-PIT; the before/after table
    assert len(seen["tables"]) == 5
    for rows, height in seen["tables"]:
        assert rows >= 4 and height > 50


def test_screenshot_shows_the_figures(report, tmp_path):
    shot = tmp_path / "shot.png"
    res = _chromium(f"--screenshot={shot}", "--window-size=1200,3000",
                    "--hide-scrollbars", (report / "report.html").as_uri())
    assert shot.exists(), (res.returncode, res.stderr[-2000:])
    img = matplotlib.image.imread(shot)[..., :3]  # floats in [0, 1]
    assert img.shape[:2] == (3000, 1200)
    # non-blank: text and lines (dark pixels) well spread down the page
    dark = img.sum(-1) < 1.5
    rows_with_ink = np.flatnonzero(dark.any(1))
    assert dark.mean() > 0.005 and rows_with_ink.max() - rows_with_ink.min() > 2000
    # matplotlib's first colour, #1f77b4 (31, 119, 180): the curves and histograms
    blue = (np.abs(img - np.array([31, 119, 180]) / 255).max(-1) < 0.08)
    assert blue.sum() > 2000
    # and the figures lie below the first tables (the page's top is text)
    assert np.flatnonzero(blue.any(1)).min() > 200
