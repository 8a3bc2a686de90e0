"""axe-core on the built site: seven pages, desktop and phone width, light and dark (issue 32).

The pages a reader meets most — the home page, §2 and §11 of lecture 7, c13 of chapter 20, the P08 notebook
page, one page of the code reference, and the playground with its model loaded and a line typed (issue 40) —
are opened in headless Chromium at 1280 and 375 px, once with the
light palette and once with the dark one (the palette follows the system setting: the browser is asked for
a light or a dark scheme, and the test checks that Material applied it). axe-core then checks each page as
a reader sees it once it has settled (its web font loaded, its scrolling boxes marked, transitions off), and
any *serious* or *critical* violation fails the test, naming the rule, the elements and what axe says to do.

Material's own markup that the book cannot reach is left out in :data:`EXCLUDED`, each with its reason (it
is empty now: Material's search dialog gets a name and its footer a readable grey in the book's build).

axe-core comes from the npm registry, installed on first use into ``.book-cache/npm`` (never committed);
without npm, or without the network to reach it, the test is skipped and says why. Like tests/test_browser.py
it drives the system Chromium through playwright and is marked ``browser``.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import ROOT, InFlight

pytestmark = pytest.mark.browser

NPM_DIR = ROOT / ".book-cache" / "npm"
AXE = NPM_DIR / "node_modules" / "axe-core" / "axe.min.js"
PAGES = {
    "home": "",
    "lecture07 §2": "lecture07/s02-self-attention/",
    "lecture07 §11": "lecture07/s11-experiments/",
    "chapter20 c13": "chapter20/c13-attention-weights/",
    "P08 notebook": "chapter20/p08-practice/",
    "api/transformer": "api/transformer/",
    "chapter20 playground": "chapter20/p08b-playground/",
}
# What a page does before axe looks at it, as a reader would: the playground loads its model and gets a line.
PREPARE = {
    "chapter20 playground": """async () => {
      const ready = () => (document.querySelector('.book-pg-status') || {}).textContent?.includes('已载入');
      for (let i = 0; i < 300 && !ready(); i++) await new Promise(r => setTimeout(r, 100));
      const box = document.querySelector('#book-pg-text');
      box.value = '床前明月光，';
      box.dispatchEvent(new Event('input'));
      await new Promise(r => setTimeout(r, 400));
      document.querySelector('.book-pg-go').click();
      return ready();
    }""",
}
SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 375, "height": 740}}
SCHEMES = {"light": "default", "dark": "slate"}  # the browser's preference → Material's palette
FAILING = ("serious", "critical")

# CSS selector → why the book cannot fix it (axe leaves these elements out).
EXCLUDED: dict[str, str] = {}


@pytest.fixture(scope="session")
def axe_source() -> str:
    if not AXE.exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("axe-core comes from the npm registry, and there is no npm here (install Node.js)")
        NPM_DIR.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run([npm, "install", "--prefix", str(NPM_DIR), "--no-audit", "--no-fund",
                                   "--loglevel=error", "axe-core@4"], capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            pytest.skip("npm could not install axe-core within 5 minutes (no network to the npm registry?)")
        if done.returncode != 0 or not AXE.exists():
            pytest.skip(f"npm could not install axe-core (no network to the npm registry?): {done.stderr[-500:]}")
    return AXE.read_text(encoding="utf-8")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".woff2": "font/woff2", ".svg": "image/svg+xml", ".js": "text/javascript", ".json": "application/json",
    }

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def site(chromium, built_site: Path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(built_site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def contexts(chromium):
    made: dict[tuple[str, str], object] = {}

    def get(size: str, scheme: str):
        if (size, scheme) not in made:
            context = chromium.new_context(viewport=SIZES[size], device_scale_factor=1, locale="zh-CN",
                                           color_scheme=scheme)
            made[size, scheme] = (context, InFlight(context))
        return made[size, scheme]

    yield get
    for context, _ in made.values():
        context.close()


# The page as a reader has it once it has settled: fonts in, Material started, scrolling boxes marked
# (book/site/page_script.py marks them when the browser is idle), no colour half-way through a transition.
SETTLE = """
async () => {
  await document.fonts.ready;
  await new Promise(r => requestIdleCallback(() => r(), {timeout: 5000}));
  await new Promise(r => requestIdleCallback(() => r(), {timeout: 5000}));
  const style = document.createElement('style');
  style.textContent = '*, *::before, *::after { transition: none !important; animation: none !important; }';
  document.head.appendChild(style);
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return document.body.getAttribute('data-md-color-scheme');
}
"""

RUN_AXE = """
async (exclude) => {
  const context = exclude.length ? {include: [document], exclude: exclude.map(s => [s])} : document;
  const result = await axe.run(context, {resultTypes: ['violations']});
  return result.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => ({target: n.target.join(' '), summary: (n.failureSummary || '').slice(0, 300)}))}));
}
"""


@pytest.mark.parametrize("scheme", list(SCHEMES))
@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("label", list(PAGES))
def test_no_serious_or_critical_accessibility_violation(axe_source: str, site: str, contexts, label: str,
                                                         size: str, scheme: str) -> None:
    context, requests = contexts(size, scheme)
    page = context.new_page()
    try:
        page.goto(site + PAGES[label], wait_until="load")
        if label in PREPARE:
            assert page.evaluate(PREPARE[label]), f"{label}: the page did not get ready"
        requests.settle(page)
        applied = page.evaluate(SETTLE)
        assert applied == SCHEMES[scheme], f"asked for the {scheme} scheme, Material shows {applied!r}"
        page.add_script_tag(content=axe_source)
        violations = page.evaluate(RUN_AXE, list(EXCLUDED))
    finally:
        page.close()
    failing = [v for v in violations if v["impact"] in FAILING]
    report = "\n".join(
        f"  {v['id']} ({v['impact']}): {v['help']} — {len(v['nodes'])} element(s)\n"
        + "\n".join(f"      {n['target']}: {n['summary'].splitlines()[-1] if n['summary'] else ''}"
                    for n in v["nodes"][:5])
        for v in failing)
    assert not failing, f"{label} at {size} width, {scheme}:\n{report}"

