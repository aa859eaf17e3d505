#!/usr/bin/python3
"""Tests `allotheque-trace summary` end to end.

Default (ctest trace_summary_html): make a synthetic trace (summary_trace_gen)
or take --trace FILE, write the HTML report, load it in headless Chromium
through chromedriver (a real browser), and check: no console errors, the
charts are drawn, the text filter and the size filter show the rows the
embedded JSON says they should, clicking column headers sorts descending then
ascending, and a screenshot (PNG, in --out) is not blank.

--cli-only (ctest trace_summary_cli): no browser; the text report of the
synthetic trace, a corrupt trace (exit 1, clear message), a truncated trace
(exit 1, then 0 with --allow-truncated).

Needs Debian's chromium, chromium-driver and python3-selenium (installed by
scripts/lib/deps.sh); a missing one is a failure naming the package.
"""
import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def note(msg):
    print(msg, flush=True)


def run(cmd, **kw):
    note("$ " + " ".join(cmd))
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


# --- the report's filter semantics, mirrored (see html_report.hpp) ---------

def site_text(x):
    return "\n".join([x["fn"], x["loc"], x["file"], x["module"], x["mloc"], x["inl"], x["addr"]]).lower()


def size_match(x, lo, hi):
    if lo is None and hi is None:
        return True
    a = float("-inf") if lo is None else lo
    b = float("inf") if hi is None else hi
    if any(a <= s <= b for s, _ in x["sizes"]):
        return True
    return x["more"] and x["max"] >= a and x["min"] <= b


def expected_rows(data, text="", lo=None, hi=None):
    q = text.strip().lower()
    return [x for x in data["sites"] if (not q or q in site_text(x)) and size_match(x, lo, hi)]


# --- PNG sanity without third-party modules --------------------------------

def check_png(path):
    with open(path, "rb") as f:
        png = f.read()
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        fail("%s is not a PNG" % path)
    width, height = struct.unpack(">II", png[16:24])
    if width < 600 or height < 400:
        fail("screenshot is only %dx%d" % (width, height))
    idat, pos = b"", 8
    while pos < len(png):
        n, kind = struct.unpack(">I4s", png[pos:pos + 8])
        if kind == b"IDAT":
            idat += png[pos + 8:pos + 8 + n]
        pos += 12 + n
    raw = zlib.decompress(idat)
    distinct = len(set(raw[:: max(1, len(raw) // 200000)]))
    if len(png) < 20000 or distinct < 32:
        fail("screenshot looks blank (%d bytes, %d distinct byte values)" % (len(png), distinct))
    note("screenshot %s: %dx%d, %d bytes, %d distinct byte values" % (path, width, height, len(png), distinct))


# --- CLI checks -------------------------------------------------------------

def cli_checks(tool, trace, out):
    r = run([tool, "summary", "--top", "5", trace])
    if r.returncode != 0:
        fail("summary exited %d: %s" % (r.returncode, r.stderr))
    for needle in ["Process", "Totals", "Peak", "Small objects", "Size histogram", "Lifetimes", "Threads",
                   "Top 5 call sites by count", "Top 5 call sites by bytes", "<= 64 B", "live bytes"]:
        if needle not in r.stdout:
            fail("text report lacks %r:\n%s" % (needle, r.stdout))
    with open(trace, "rb") as f:
        data = bytearray(f.read())
    corrupt = os.path.join(out, "corrupt.atq")
    bad = bytearray(data)
    bad[len(bad) // 2] ^= 0x5A
    with open(corrupt, "wb") as f:
        f.write(bad)
    r = run([tool, "summary", corrupt])
    if r.returncode != 1 or "error" not in r.stderr or r.stdout:
        fail("corrupt trace: exit %d, stdout %r, stderr %r" % (r.returncode, r.stdout[:200], r.stderr))
    note("corrupt trace -> exit 1: " + r.stderr.strip())
    notrace = os.path.join(out, "not-a-trace.atq")
    with open(notrace, "wb") as f:
        f.write(b"hello, I am not a trace at all, but long enough to have a header\n")
    r = run([tool, "summary", notrace])
    if r.returncode != 1 or "not an allotheque trace" not in r.stderr:
        fail("non-trace: exit %d, stderr %r" % (r.returncode, r.stderr))
    cut = os.path.join(out, "truncated.atq")
    with open(cut, "wb") as f:
        f.write(data[: len(data) * 2 // 3])
    r = run([tool, "summary", cut])
    if r.returncode != 1 or "truncated" not in r.stderr or "--allow-truncated" not in r.stderr:
        fail("truncated trace without --allow-truncated: exit %d, stderr %r" % (r.returncode, r.stderr))
    r = run([tool, "summary", "--allow-truncated", cut])
    if r.returncode != 0 or "TRUNCATED" not in r.stdout:
        fail("truncated trace with --allow-truncated: exit %d, stderr %r" % (r.returncode, r.stderr))
    r = run([tool, "summary", "--bogus", trace])
    if r.returncode != 2:
        fail("unknown option: exit %d" % r.returncode)
    r = run([tool, "summary", os.path.join(out, "does-not-exist.atq")])
    if r.returncode != 1 or "cannot open" not in r.stderr:
        fail("missing file: exit %d, stderr %r" % (r.returncode, r.stderr))
    note("CLI checks passed")


# --- browser checks ---------------------------------------------------------

def find_chromium():
    for p in ["/usr/lib/chromium/chromium", "/usr/bin/chromium"]:
        if os.access(p, os.X_OK):
            return p
    return None


def browser_checks(report, out, synthetic, chromedriver):
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait
    except ImportError as e:
        fail("selenium is missing (%s): install the Debian package python3-selenium "
             "(scripts/lib/deps.sh does), and run this test with /usr/bin/python3" % e)
    chromium = find_chromium()
    if not chromium:
        fail("chromium is missing: install the Debian package chromium (scripts/lib/deps.sh does)")
    if not os.access(chromedriver, os.X_OK):
        fail("%s is missing: install the Debian package chromium-driver (scripts/lib/deps.sh does)" % chromedriver)

    profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=out)
    opts = Options()
    opts.binary_location = chromium
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--disable-background-networking", "--disable-extensions", "--no-first-run",
              "--window-size=1400,1000", "--user-data-dir=" + profile]:
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(service=Service(chromedriver), options=opts)
    except Exception as e:  # noqa: BLE001 - report whatever the driver says
        fail("cannot start headless chromium through %s: %s" % (chromedriver, e))
    try:
        driver.set_page_load_timeout(60)
        url = "file://" + os.path.abspath(report)
        note("loading " + url)
        driver.get(url)
        WebDriverWait(driver, 30).until(
            lambda d: d.execute_script("return document.body.getAttribute('data-ready') === '1'"))

        errors = [e for e in driver.get_log("browser") if e.get("level") in ("SEVERE", "ERROR")]
        if errors:
            fail("console errors: %s" % errors)

        data = driver.execute_script("return JSON.parse(document.getElementById('report-data').textContent)")
        n = len(data["sites"])
        if n == 0:
            fail("the report has no call sites")
        if data["process"]["exe"] not in driver.find_element(By.ID, "subtitle").text:
            fail("the subtitle does not name the executable")

        # Charts.
        for chart in ["live-chart", "objects-chart"]:
            paths = driver.find_elements(By.CSS_SELECTOR, "#%s path" % chart)
            ds = [p.get_attribute("d") or "" for p in paths]
            if not any(len(d) > 20 and "H" in d and "V" in d for d in ds):
                fail("#%s has no drawn path (%r)" % (chart, [d[:60] for d in ds]))
        peak_marks = driver.find_elements(By.CSS_SELECTOR, "#live-chart circle.peak")
        if data["peak"]["bytes"] > 0 and not peak_marks:
            fail("#live-chart does not mark the peak")
        series = data["series"]
        if len(series["t"]) > 2001:
            fail("time series has %d points, more than 2000" % len(series["t"]))
        if max(series["b"]) != data["peak"]["bytes"]:
            fail("the plotted maximum %d is not the peak %d" % (max(series["b"]), data["peak"]["bytes"]))
        if max(series["o"]) != data["peak"]["objects"]:
            fail("the plotted object maximum %d is not the peak %d" % (max(series["o"]), data["peak"]["objects"]))
        bars = driver.find_elements(By.CSS_SELECTOR, "#size-chart rect.bar1")
        if len(bars) != len(data["hist"]):
            fail("#size-chart has %d bars for %d buckets" % (len(bars), len(data["hist"])))
        note("charts: %d plot points, peak %d bytes, %d histogram bars" % (len(series["t"]), data["peak"]["bytes"],
                                                                         len(bars)))

        def rows():
            return driver.find_elements(By.CSS_SELECTOR, "#site-table tbody tr.site-row")

        def count_text():
            return driver.find_element(By.ID, "site-count").text

        def set_input(elem_id, value):
            e = driver.find_element(By.ID, elem_id)
            driver.execute_script(
                "arguments[0].value=''; arguments[0].dispatchEvent(new Event('input', {bubbles: true}));", e)
            if value != "":
                e.send_keys(str(value))  # real key events

        def check_filter(text="", lo=None, hi=None, expect=None):
            set_input("site-filter", text)
            set_input("size-min", "" if lo is None else lo)
            set_input("size-max", "" if hi is None else hi)
            want = expected_rows(data, text, lo, hi)
            got = rows()
            if expect is not None and len(want) != expect:
                fail("JSON-derived count %d for filter %r [%s, %s] differs from the synthetic answer %d"
                     % (len(want), text, lo, hi, expect))
            if len(got) != len(want):
                fail("filter %r size [%s, %s]: %d rows visible, expected %d" % (text, lo, hi, len(got), len(want)))
            ids = sorted(int(r.get_attribute("data-id")) for r in got)
            if ids != sorted(x["id"] for x in want):
                fail("filter %r size [%s, %s]: wrong rows" % (text, lo, hi))
            if count_text() != "%d of %d sites" % (len(want), n):
                fail("#site-count says %r, expected '%d of %d sites'" % (count_text(), len(want), n))
            note("filter %r size [%s, %s]: %d of %d rows" % (text, lo, hi, len(got), n))
            return got

        if len(rows()) != n or count_text() != "%d of %d sites" % (n, n):
            fail("unfiltered table: %d rows, #site-count %r, %d sites" % (len(rows()), count_text(), n))

        if synthetic:
            check_filter("libfoo", expect=7)
            check_filter("APP+", expect=12)  # case-insensitive
            got = check_filter("evil", expect=1)
            if "script><b>evil.so+0x40" not in got[0].text:
                fail("the module name is not shown literally: %r" % got[0].text)
            got[0].click()
            detail = driver.find_element(By.CSS_SELECTOR, "#site-table tr.detail-row").text
            if "/opt/synthetic/lib/</script><b>evil.so" not in detail:
                fail("the module path with </script> is not shown literally: %r" % detail)
            got[0].click()
            if driver.find_elements(By.CSS_SELECTOR, "#site-table b"):
                fail("a module name was parsed as HTML")
            check_filter("", 1, 64)
            check_filter("", 65, None)
            check_filter("libfoo", None, 1000)
            check_filter("no such site anywhere")
        else:
            first = data["sites"][0]
            needle = (first["fn"] or first["mloc"] or first["loc"])[:12]
            check_filter(needle)
            check_filter("", 1, 64)
            check_filter("", 257, None)
        check_filter("")

        # Sorting: click a header -> descending, again -> ascending.
        def column(key):
            vals = []
            for r in rows():
                v = r.find_element(By.CSS_SELECTOR, "td[data-key='%s']" % key).get_attribute("data-value")
                vals.append(v)
            return vals

        def as_num(v):
            return float("inf") if v == "Infinity" else float(v)

        for key in ["bytes", "count", "peak", "size", "life", "mean"]:
            th = driver.find_element(By.CSS_SELECTOR, "#site-table th[data-key='%s']" % key)
            for attempt in range(3):
                th.click()
                if th.get_attribute("aria-sort") == "descending":
                    break
            else:
                fail("clicking th[data-key=%s] never sorts descending" % key)
            vals = [as_num(v) for v in column(key)]
            if vals != sorted(vals, reverse=True):
                fail("%s descending is not sorted: %s" % (key, vals[:20]))
            th.click()
            if th.get_attribute("aria-sort") != "ascending":
                fail("second click on %s: aria-sort %r" % (key, th.get_attribute("aria-sort")))
            vals = [as_num(v) for v in column(key)]
            if vals != sorted(vals):
                fail("%s ascending is not sorted: %s" % (key, vals[:20]))
            note("sort by %s: descending and ascending OK" % key)
        th = driver.find_element(By.CSS_SELECTOR, "#site-table th[data-key='loc']")
        th.click()
        if th.get_attribute("aria-sort") != "ascending":
            fail("a text column should sort ascending first")
        vals = [v.lower() for v in column("loc")]
        if vals != sorted(vals):
            fail("loc ascending is not sorted: %s" % vals[:10])
        # Sorting keeps the filter.
        set_input("site-filter", rows()[0].find_element(By.CSS_SELECTOR, "td[data-key='loc']").text[:6])
        k = len(rows())
        driver.find_element(By.CSS_SELECTOR, "#site-table th[data-key='count']").click()
        if len(rows()) != k:
            fail("sorting changed the number of filtered rows")
        # A row click shows its details.
        rows()[0].click()
        details = driver.find_elements(By.CSS_SELECTOR, "#site-table tr.detail-row")
        if len(details) != 1 or "address" not in details[0].text:
            fail("clicking a row does not show its details")
        note("sorting and details OK")

        # Screenshot: the whole page, top sites by bytes.
        set_input("site-filter", "")
        driver.find_element(By.CSS_SELECTOR, "#site-table th[data-key='bytes']").click()
        height = driver.execute_script("return Math.min(document.documentElement.scrollHeight, 6000)")
        driver.set_window_size(1400, max(1000, height))
        driver.execute_script("window.scrollTo(0, 0)")
        shot = os.path.join(out, "summary.png")
        if not driver.save_screenshot(shot):
            fail("could not save the screenshot")
        check_png(shot)

        errors = [e for e in driver.get_log("browser") if e.get("level") in ("SEVERE", "ERROR")]
        if errors:
            fail("console errors during interaction: %s" % errors)
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    note("browser checks passed; screenshot: " + os.path.join(out, "summary.png"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tool", required=True, help="the allotheque-trace executable")
    ap.add_argument("--generator", help="summary_trace_gen, to make the synthetic trace")
    ap.add_argument("--trace", help="use this trace instead of a synthetic one")
    ap.add_argument("--out", required=True, help="directory for the trace, the report and the screenshot")
    ap.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    ap.add_argument("--cli-only", action="store_true", help="test the text report and errors, no browser")
    args = ap.parse_args()

    os.makedirs(args.out, exist_ok=True)
    if args.trace:
        trace, synthetic = args.trace, False
    else:
        if not args.generator:
            fail("give --trace FILE or --generator summary_trace_gen")
        trace, synthetic = os.path.join(args.out, "synthetic.atq"), True
        r = run([args.generator, trace])
        if r.returncode != 0:
            fail("generator failed: %s" % r.stderr)

    if args.cli_only:
        cli_checks(args.tool, trace, args.out)
        return
    report = os.path.join(args.out, "summary.html")
    r = run([args.tool, "summary", "--html", report, trace])
    if r.returncode != 0:
        fail("summary --html exited %d: %s" % (r.returncode, r.stderr))
    with open(report, encoding="utf-8", errors="replace") as f:
        page = f.read()
    if re.search(r"<script[^>]*\bsrc=|<link[^>]*stylesheet|https?://(?!www\.w3\.org/2000/svg)", page):
        fail("the report is not self-contained (external script, stylesheet or URL)")
    if page.count("</script>") != 2:
        fail("the page has %d </script> tags, expected 2 (escaping)" % page.count("</script>"))
    browser_checks(report, args.out, synthetic, args.chromedriver)


if __name__ == "__main__":
    main()
