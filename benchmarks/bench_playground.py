"""Benchmark of the playground page (chapter 20) on a phone-class CPU: how long until a reader sees a prediction.

    python benchmarks/bench_playground.py --site /tmp/site            # a built site
    python benchmarks/bench_playground.py --site /tmp/site --rounds 7 --slowdown 4

The built site is served on 127.0.0.1; the system Chromium opens the playground at 375 px with its CPU slowed
down ``--slowdown`` times (4 by default: what Lighthouse's mobile setting simulates) through the DevTools
protocol. Per round, on a fresh page: the time from the page's ``load`` to the model being ready (download
and decoding of the float16 file), then — for a one-character text, a line of a poem, and a text filling
the whole context — the time from the last keystroke to the prediction shown (the page waits 120 ms after a
keystroke before it computes: included). Prints the median and the range of the rounds; asserts nothing.
The issue's budget is 1 s from the last keystroke.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import statistics
import threading
from pathlib import Path

PAGE = "chapter20/p08b-playground/"
TEXTS = {"一个字": "月", "一句诗": "床前明月光，疑是地上霜。",
         "整个窗口": "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。床前明月光，"}

READY = "(document.querySelector('.book-pg-status') || {}).textContent?.includes('已载入')"
TYPE_AND_TIME = """async (text) => {
  const box = document.querySelector('#book-pg-text'), table = document.querySelector('.book-pg-next');
  const before = table.innerHTML;
  box.value = text;
  const start = performance.now();
  box.dispatchEvent(new Event('input'));
  await new Promise(resolve => {
    const seen = new MutationObserver(() => { if (table.innerHTML !== before) { seen.disconnect(); resolve(); } });
    seen.observe(table, {childList: true, subtree: true});
  });
  return performance.now() - start;
}"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def main() -> None:
    from playwright.sync_api import sync_playwright

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--site", type=Path, required=True, help="a built site")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--slowdown", type=float, default=4.0)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    args = ap.parse_args()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(args.site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/{PAGE}"
    times: dict[str, list[float]] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium, args=["--no-sandbox", "--headless"])
        for _ in range(args.rounds):
            context = browser.new_context(viewport={"width": 375, "height": 740}, is_mobile=True, has_touch=True)
            page = context.new_page()
            cdp = context.new_cdp_session(page)
            cdp.send("Emulation.setCPUThrottlingRate", {"rate": args.slowdown})
            page.goto(url, wait_until="load")
            loaded = page.evaluate("performance.now()")
            page.wait_for_function(READY, timeout=120_000)
            times.setdefault("模型就绪（load 之后）", []).append(page.evaluate("performance.now()") - loaded)
            for name, text in TEXTS.items():
                times.setdefault(f"最后一次按键 → 预测（{name}）", []).append(page.evaluate(TYPE_AND_TIME, text))
            context.close()
        browser.close()
    server.shutdown()
    print(f"\nplayground at 375 px, CPU slowed down {args.slowdown:g}×, {args.rounds} rounds (ms)\n")
    print("| what | median | min | max |\n|---|---|---|---|")
    for what, values in times.items():
        print(f"| {what} | {statistics.median(values):.0f} | {min(values):.0f} | {max(values):.0f} |")


if __name__ == "__main__":
    main()
