"""Look at a trainperf report in a real browser: a headless Chromium screenshot at a laptop's width, and how many
laptop screens the page is long.

    python benchmarks/report_screenshot.py trainperf-results/report.html --out docs/report.png

Chromium is not one of trainperf's dependencies (Debian: ``apt install chromium``); the script says so when it
is missing. The page is drawn in a window 1366 pixels wide and as tall as ``--max-height`` and the screenshot is
cut below the last row of pixels that is not background: that height, divided by a laptop screen's 768 pixels,
is the number of screens printed (``--json`` for a script). ``--width`` and ``--screen`` change the laptop.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def find_browser(name: str | None) -> str:
    for candidate in [name] if name else BROWSERS:
        found = shutil.which(candidate)
        if found:
            return found
    raise SystemExit(
        f"no browser found ({name or ', '.join(BROWSERS)}): install Chromium (Debian: apt install chromium) "
        "or name one with --browser"
    )


def screenshot(report: Path, png: Path, *, browser: str, width: int, height: int) -> None:
    with tempfile.TemporaryDirectory() as profile:
        cmd = [
            browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--user-data-dir={profile}", f"--window-size={width},{height}", f"--screenshot={png}",
            report.resolve().as_uri(),
        ]  # fmt: skip
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0 or not png.is_file():
        raise SystemExit(f"{browser} made no screenshot (exit {r.returncode}): {r.stderr.strip()[-2000:]}")


def content_height(png: Path) -> int:
    """The last row of pixels that is not the page's background (its top-left pixel's colour), plus one."""
    import numpy as np
    from PIL import Image

    pixels = np.asarray(Image.open(png).convert("RGB")).astype(np.int16)
    background = pixels[0, 0]
    rows = np.nonzero((np.abs(pixels - background).max(axis=2) > 8).any(axis=1))[0]
    return int(rows[-1]) + 1 if rows.size else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("report", type=Path, help="a report.html written by `trainperf report`")
    p.add_argument("--out", type=Path, default=Path("report.png"), help="the screenshot (PNG, cut to the page)")
    p.add_argument("--width", type=int, default=1366, help="window width in pixels (a laptop's: 1366)")
    p.add_argument("--screen", type=int, default=768, help="one screen's height in pixels (a laptop's: 768)")
    p.add_argument("--max-height", type=int, default=12000, help="the tallest page drawn, in pixels")
    p.add_argument("--browser", help=f"the Chromium to use (default: the first of {', '.join(BROWSERS)} on PATH)")
    p.add_argument("--json", action="store_true", help="print the measurement as JSON")
    args = p.parse_args(argv)
    if not args.report.is_file():
        raise SystemExit(f"{args.report}: no such report; make one with `trainperf report RESULTS -o report.html`")
    browser = find_browser(args.browser)
    from PIL import Image

    with tempfile.TemporaryDirectory() as tmp:
        full = Path(tmp) / "full.png"
        screenshot(args.report, full, browser=browser, width=args.width, height=args.max_height)
        height = content_height(full)
        if height >= args.max_height:
            print(f"the page is at least {args.max_height} px long: raise --max-height", file=sys.stderr)
        bottom = min(args.max_height, height + 16)
        Image.open(full).crop((0, 0, args.width, bottom)).save(args.out, optimize=True)
    screens = height / args.screen
    result = {"report": str(args.report), "screenshot": str(args.out), "width_px": args.width,
              "content_height_px": height, "screen_px": args.screen, "screens": round(screens, 2)}  # fmt: skip
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{args.report}: {height} px long at {args.width} px wide, {screens:.1f} screens of {args.screen} px; "
              f"screenshot {args.out}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
