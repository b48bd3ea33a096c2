"""Screenshots of every page of the explain app on one run, for reports/screenshots/.

    factcheck run --data-dir data/demo --out out/demo
    python -m scripts.app_screenshots out/demo --name demo --claim "Sea levels are rising because glaciers melt."

Starts ``factcheck serve --run RUN`` on a free loopback port (harness.serving), opens each
page in headless Chromium (Debian's /usr/bin/chromium, through Playwright) at 1280 px wide
and writes ``PAGE-NAME.png``: the landing page, the check page and the comparison for
``--claim``, the dev explorer (its first screen-fulls), the results page and the API page.
PNGs are reduced to 256 colours (Pillow, which matplotlib brings) to keep the repository small.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from urllib.parse import urlencode

from harness.measure import ROOT
from harness.serving import serving

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--hide-scrollbars"]


def pages(claim: str) -> list[tuple[str, str, int | None]]:
    """(file stem, path, height): height None = the whole page."""
    return [("landing", "/", None),
            ("check-page", "/?" + urlencode({"claim": claim}), None),
            ("compare", "/compare?" + urlencode({"claim": claim}), None),
            ("dev-explorer", "/dev?show=wrong", 2400),
            ("results-page", "/results", None),
            ("api-page", "/api", None)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="output directory of `factcheck run`")
    ap.add_argument("--name", required=True, help="suffix of the file names: demo, proxy, ...")
    ap.add_argument("--claim", required=True, help="the claim of the check and comparison pages")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "screenshots")
    ap.add_argument("--only", nargs="*", default=None, help="page stems to take (default: all)")
    args = ap.parse_args(argv)

    from PIL import Image
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, serving(["--run", args.run], Path(tmp) / "serve.log", cwd=ROOT) as (url, _):
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                for stem, path, height in pages(args.claim):
                    if args.only and stem not in args.only:
                        continue
                    page = browser.new_page(viewport={"width": 1280, "height": height or 900})
                    page.goto(url + path)
                    target = args.out / f"{stem}-{args.name}.png"
                    page.screenshot(path=str(target), full_page=height is None)
                    page.close()
                    Image.open(target).convert("RGB").quantize(256).save(target, optimize=True)
                    print(f"wrote {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")
            finally:
                browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
