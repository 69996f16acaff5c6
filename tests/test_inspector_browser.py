"""The web inspector in a real browser: Debian's Chromium driven headless by Playwright (its
bundled driver; no browser is downloaded) against a real `lamina serve` on 127.0.0.1, with a
bank retained from the shared Claude Code sessions and a context log compiled from one.

Screenshots of every page (at load, at 1280px, and at a phone's width) go to
$LAMINA_ARTIFACTS/inspector/ (CI sets it to artifacts/, git-ignored, and keeps them), else to
artifacts/inspector/ under pytest's base temporary directory; the first test prints where.
Without Chromium or Playwright the tests skip with the reason, unless LAMINA_REQUIRE_CHROMIUM=1
(as in CI): then they fail with it. LAMINA_CHROMIUM names another Chromium binary (default
/usr/bin/chromium). Emoji need a colour emoji font (Debian: fonts-noto-color-emoji).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lamina.integrations.claude_code.contract import HookLog

from .conftest import CLAUDE_CODE, ROOT, needs_shared

httpx = pytest.importorskip("httpx")

SHOTS = (
    Path(os.environ["LAMINA_ARTIFACTS"]) / "inspector"
    if os.environ.get("LAMINA_ARTIFACTS")
    else None
)
CHROMIUM = os.environ.get("LAMINA_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
LONG = CLAUDE_CODE / "obra-long-conversation.jsonl"
SESSION_ID = "9a9eadc8-c1f1-493e-a0f1-884aa996b05b"
PHONE = {"width": 390, "height": 844}
pytestmark = needs_shared


def _unavailable(reason: str) -> None:
    if os.environ.get("LAMINA_REQUIRE_CHROMIUM") == "1":
        pytest.fail(
            f"Chromium and Playwright are required here (LAMINA_REQUIRE_CHROMIUM=1): {reason}"
        )
    pytest.skip(f"{reason} (apt-get install chromium; pip install playwright)")


@pytest.fixture(scope="module", autouse=True)
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the screenshots go (printed once)."""
    global SHOTS
    if SHOTS is None:
        SHOTS = tmp_path_factory.getbasetemp() / "artifacts" / "inspector"
    SHOTS.mkdir(parents=True, exist_ok=True)
    print(f"\ninspector screenshots: {SHOTS}")
    return SHOTS


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        _unavailable(f"no Chromium at {CHROMIUM}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed")
    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


def lamina(home: Path, *args: str) -> str:
    env = {**os.environ, "LAMINA_HOME": str(home)}
    env.pop("LAMINA_DATABASE_URL", None)
    out = subprocess.run([sys.executable, "-m", "lamina", *args], capture_output=True,
                         text=True, env=env, timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


class Served:
    """`lamina inspect --no-browser` on a free loopback port, as a user starts it. Without API
    keys it prints a one-time login address (`login`); with `sign_in`, that address is used
    here once, and every browser context of a test gets the session cookie it set."""

    def __init__(self, home: Path, sign_in: bool = True) -> None:
        env = {**os.environ, "LAMINA_HOME": str(home)}
        env.pop("LAMINA_DATABASE_URL", None)
        self.proc = subprocess.Popen([sys.executable, "-m", "lamina", "inspect", "--no-browser"],
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)  # fmt: skip
        assert self.proc.stdout is not None
        self.home = home
        self.login = self.proc.stdout.readline().strip()
        self.url = self.login.split("?", 1)[0]
        assert self.url.startswith("http://127.0.0.1:") and self.url.endswith("/"), self.login
        token = home / "local-token"
        keyless = "?token=" in self.login
        self.headers = {"Authorization": f"Bearer {token.read_text().strip()}"} if keyless else {}
        self.cookies: list[dict[str, Any]] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise RuntimeError("the inspector did not start")
        if keyless and sign_in:
            signed = httpx.get(self.login, follow_redirects=False, timeout=30)
            assert signed.status_code == 303, signed.text
            self.cookies = [
                {"name": name, "value": value, "url": self.url, "sameSite": "Strict"}
                for name, value in signed.cookies.items()
            ]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("inspector") / "home"
    lamina(home, "retain", str(LONG), "--bank", "demo")
    lamina(
        home, "retain", str(CLAUDE_CODE / "drmaciver-python-to-rust-port.jsonl"), "--bank", "demo"
    )
    # Two compiles, the second at a smaller budget, so the log has a compile history with a
    # broken cache prefix; the last one (6,000 tokens) is what the strip shows.
    lamina(home, "compile", str(LONG), "--budget", "12000", "--bank", "demo", "--log", "long")
    lamina(home, "compile", str(LONG), "--budget", "6000", "--bank", "demo", "--log", "long")
    # A real prompt hook run, as Claude Code starts it, so the hook page shows a real log line.
    event = {
        "hook_event_name": "UserPromptSubmit",
        # A later session of the project: the asking session's own memories are not
        # recalled, and the other one retained here does not answer this prompt.
        "session_id": "a-later-session",
        "prompt": "How do we test the oracle against screenshots?",
        "cwd": str(home),
    }
    ran = subprocess.run(
        [sys.executable, "-m", "lamina", "hook"], input=json.dumps(event), capture_output=True,
        text=True, timeout=120,
        env={**os.environ, "LAMINA_HOME": str(home), "LAMINA_BANK": "demo",
             "LAMINA_HOOK_TIME_LIMIT": "60"},
    )  # fmt: skip
    assert ran.returncode == 0 and "lamina_memories" in ran.stdout, ran.stderr
    HookLog(home).write("Stop", SESSION_ID, "retain started")
    server = Served(home)
    yield server
    server.stop()


class Watched:
    """A page whose console errors, failed requests and error answers are collected."""

    def __init__(
        self, browser: Any, viewport: dict[str, int] | None = None, served: Served | None = None
    ) -> None:
        self.context = browser.new_context(viewport=viewport or {"width": 1280, "height": 900})
        if served is not None and served.cookies:
            self.context.add_cookies(served.cookies)
        self.page = self.context.new_page()
        self.problems: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.problems.append(m.text))
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("requestfailed", lambda r: self.problems.append(f"failed: {r.url}"))
        self.page.on(
            "response",
            lambda r: r.status >= 400 and self.problems.append(f"{r.status}: {r.url}"),
        )

    def open(self, url: str, ready: str) -> Any:
        self.page.goto(url)
        self.page.wait_for_selector(ready)
        return self.page

    def shot(self, name: str, full_page: bool = True) -> Path:
        assert SHOTS is not None
        SHOTS.mkdir(parents=True, exist_ok=True)
        path = SHOTS / f"{name}.png"
        try:
            self.page.screenshot(path=str(path), full_page=full_page)
        except Exception as error:  # a page still drawing may have no frame to give yet
            if "Unable to capture screenshot" not in str(error):
                raise
            self.page.screenshot(path=str(path), full_page=full_page)
        return path

    def close(self) -> None:
        self.context.close()


PAGES = [
    ("banks", "#/banks", ".card"),
    ("memories", "#/memories?bank=demo", "#memories .memory"),
    ("recall", "#/recall?bank=demo&q=scenario+testing+oracle", "#block"),
    ("logs", "#/logs?bank=demo&log=long", "#strip button"),
    ("hooks", "#/hooks", "table"),
]


@pytest.mark.parametrize(("name", "where", "ready"), PAGES)
def test_every_page_loads_cleanly_on_laptop_and_phone(
    browser: Any, served: Served, name: str, where: str, ready: str
) -> None:
    for size, viewport in (("laptop", None), ("phone", PHONE)):
        watched = Watched(browser, viewport, served)
        page = watched.open(served.url + where, ready)
        assert page.locator("main h2").first.is_visible()
        assert page.locator("main .error").count() == 0, page.locator("main .error").inner_text()
        watched.shot(f"{name}-{size}")
        if size == "phone":  # nothing wider than the screen but what scrolls on purpose
            overflow = page.evaluate("document.documentElement.scrollWidth - innerWidth")
            assert overflow <= 1, f"{name} is {overflow}px wider than a phone screen"
        watched.close()
        assert watched.problems == [], f"{name} ({size}): {watched.problems}"


ONE_LINE = """els => els.map(e => {
  const range = document.createRange(); range.selectNodeContents(e);
  const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
  return [e.textContent, tops.size];
})"""
"""Each element's text, and on how many lines it lies."""

FILLED = {
    "banks": "#main .card h3 a",
    "memories": "#memories .memory .origin .chip.agent",
    "recall": "#block",
    "logs": "#strip button",
    "hooks": "table.injections tbody tr",
}


@pytest.mark.parametrize(("name", "where", "ready"), PAGES)
def test_first_paint_shows_the_banks_and_each_page_fills_at_1280(
    browser: Any, served: Served, name: str, where: str, ready: str
) -> None:
    watched = Watched(browser, {"width": 1280, "height": 900}, served)
    page = watched.page
    # At load: the banks, rendered by the server into the page, not "Loading…".
    page.goto(served.url + where, wait_until="load")
    text = page.locator("main").inner_text()
    assert "Loading" not in text, text[:300]
    # The banks, or already the page itself where its data came in before the load event.
    assert page.locator("main h2").first.is_visible()
    assert "demo" in text or page.locator(FILLED[name]).count() > 0, text[:300]
    assert watched.shot(f"{name}-load", full_page=False).stat().st_size > 10_000
    # Then the page itself, filled, at 1280px.
    page.wait_for_selector(ready)
    page.wait_for_selector(FILLED[name])
    page.wait_for_selector("main:not([aria-busy])")
    assert page.locator("main .error").count() == 0
    watched.shot(f"{name}-1280")
    overflow = page.evaluate("document.documentElement.scrollWidth - innerWidth")
    assert overflow <= 1, f"{name} is {overflow}px wider than 1280px"
    # Dates stay on one line: the bank cards' and the memories' headers.
    dates = page.locator("dd.date, .memory header > span:not(.mono)").evaluate_all(ONE_LINE)
    wrapped = [t for t, lines in dates if lines > 1]
    assert not wrapped, f"{name}: dates wrapped at 1280px: {wrapped}"
    watched.close()
    assert watched.problems == [], watched.problems


def test_banks_in_the_first_page_are_escaped_and_only_the_callers(served: Served) -> None:
    signed = {c["name"]: c["value"] for c in served.cookies}
    page = httpx.get(served.url, cookies=signed, timeout=30).text
    assert 'aria-label="Bank demo"' in page and 'id="lamina-initial"' in page
    assert '<p class="muted">Loading…</p>' not in page
    # Without the session the page carries no bank data.
    bare = httpx.get(served.url, timeout=30).text
    assert "lamina-initial" not in bare and "Bank demo" not in bare


def test_emoji_render_in_colour_not_as_boxes(browser: Any, served: Served) -> None:
    """An emoji drawn in the page's font stack has colour (a missing glyph is a grey box)."""
    watched = Watched(browser, served=served)
    page = watched.open(served.url + "#/banks", ".card")
    coloured = page.evaluate("""() => {
      const canvas = document.createElement("canvas"); canvas.width = 48; canvas.height = 48;
      const g = canvas.getContext("2d");
      g.font = `36px ${getComputedStyle(document.body).fontFamily}`;
      g.textBaseline = "top"; g.fillStyle = "#000"; g.fillText("📌", 2, 2);
      const d = g.getImageData(0, 0, 48, 48).data; let n = 0;
      for (let i = 0; i < d.length; i += 4) {
        const [r, gr, b] = [d[i], d[i + 1], d[i + 2]];
        if (d[i + 3] > 0 && Math.max(r, gr, b) - Math.min(r, gr, b) > 60) n++;
      }
      return n;
    }""")
    assert coloured > 50, "the pin emoji has no colour: no emoji font (fonts-noto-color-emoji)"
    watched.close()


def test_memories_show_their_agent_and_session_and_filter_by_agent(
    browser: Any, served: Served
) -> None:
    watched = Watched(browser, served=served)
    page = watched.open(served.url + "#/memories?bank=demo", "#memories .memory")
    origins = page.locator("#memories .memory .origin").all_inner_texts()
    assert origins and all("claude-code" in o and "session " in o for o in origins)
    assert any(f"session {SESSION_ID[:8]}" in o for o in origins)
    options = page.locator("#f-agent option").all_inner_texts()
    assert any(o.startswith("claude-code (2 sessions)") for o in options), options
    page.select_option("#f-agent", "claude-code")
    page.click("form.filters button[type=submit]")
    page.wait_for_selector("#memory-count:has-text('matching')")
    assert page.locator("#memories .memory").count() > 0
    watched.shot("memories-agent")
    watched.close()
    assert watched.problems == []


def test_search_finds_a_word_from_a_shared_session(browser: Any, served: Served) -> None:
    watched = Watched(browser, served=served)
    page = watched.open(served.url + "#/memories?bank=demo", "#memories .memory")
    page.fill("#f-q", "Containerfile")
    page.press("#f-q", "Enter")
    page.wait_for_selector("#memory-count:has-text('matching')")
    texts = page.locator("#memories .memory .text").all_inner_texts()
    assert texts and all("containerfile" in t.lower() for t in texts)
    marks = page.locator("#memories .memory .text mark").all_inner_texts()
    assert marks and {m.lower() for m in marks} == {"containerfile"}
    page.fill("#f-q", "zzzz-no-such-word")
    page.press("#f-q", "Enter")
    page.wait_for_selector("p.empty")
    assert "No memory matches" in page.locator("p.empty").inner_text()
    watched.shot("memories-search")
    watched.close()
    assert watched.problems == []


def test_recall_playground_shows_channel_bars_and_the_block(browser: Any, served: Served) -> None:
    watched = Watched(browser, served=served)
    page = watched.open(served.url + "#/recall?bank=demo", "#r-query")
    page.fill("#r-query", "which oracle evaluates the screenshots?")
    page.click("button[type=submit]")
    page.wait_for_selector("#block")
    bars = page.locator("#hits .bar.lexical > span, #hits .bar.dense > span")
    widths = [b.evaluate("e => e.getBoundingClientRect().width") for b in bars.all()]
    assert any(w > 0 for w in widths)
    labels = page.locator("#hits .bar").evaluate_all("bars => bars.map(b => b.ariaLabel)")
    assert any(label.startswith("lexical: rank") for label in labels)
    assert any(label.startswith("dense: rank") for label in labels)
    assert page.locator("#block").inner_text().startswith("<lamina_memories>")
    size = page.locator("#block-size").inner_text()
    shown, budget = (int(n.replace(",", "")) for n in size.split(" tokens")[0].split(" of "))
    assert 0 < shown <= budget == 1024, size  # the hook's default budget
    # The hook's way: a prompt and the turns before it, composed into the query.
    page.check("#r-hook")
    page.fill("#r-prompt", "what should the oracle look at?")
    page.fill("#r-context", "user: we want scenario tests\nassistant: with screenshots")
    page.click("button[type=submit]")
    page.wait_for_selector("text=composed as the hook does")
    watched.shot("recall-hook")
    watched.close()
    assert watched.problems == []


def test_log_strip_levels_summary_and_another_budget(browser: Any, served: Served) -> None:
    watched = Watched(browser, served=served)
    page = watched.open(served.url + "#/logs?bank=demo&log=long", "#strip button")
    levels = set(page.locator("#strip button").evaluate_all("bs => bs.map(b => b.dataset.level)"))
    assert len(levels) >= 2 and "0" in levels, levels
    summary = page.locator("#strip button:not([data-level='0'])").first
    summary.focus()
    page.keyboard.press("Enter")  # keyboard works as well as a click
    page.wait_for_selector("#summary-text")
    assert page.locator("#summary-detail .covered .msg").count() > 0
    watched.shot("logs-summary")
    history = page.locator("#compiles tbody tr")
    assert history.count() == 2
    assert "broke at message" in history.first.inner_text()  # newest first: the smaller budget
    assert "first compile" in history.last.inner_text()
    before = page.locator("#strip button").count()
    page.fill("#s-budget", "40000")
    page.click("text=Compile (preview)")
    page.wait_for_selector("#prefix-note")
    assert "Preview" in page.locator("#strip-holder").inner_text()
    assert page.locator("#strip button").count() != before
    watched.shot("logs-preview")
    watched.close()
    assert watched.problems == []


def test_keyboard_reaches_every_page(browser: Any, served: Served) -> None:
    watched = Watched(browser, served=served)
    page = watched.open(served.url, ".card")
    for _ in range(12):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent") == "Hook activity":
            break
    page.keyboard.press("Enter")
    page.wait_for_selector("text=Hook activity")
    page.wait_for_function("location.hash === '#/hooks'")
    watched.close()
    assert watched.problems == []


def test_the_printed_address_signs_the_browser_in_once(browser: Any, served: Served) -> None:
    """As a user opens it: the address `lamina inspect` printed signs the browser in, leaves
    the address bar without its code and keeps the session across loads; the same address in
    another browser is refused (the code is spent) and that browser is asked for a key."""
    fresh = Served(served.home, sign_in=False)
    try:
        watched = Watched(browser)
        page = watched.open(fresh.login, ".card")
        assert page.url.startswith(fresh.url) and "token" not in page.url
        page.reload()
        page.wait_for_selector(".card")
        other = Watched(browser)
        other.open(fresh.login, "#api-key")
        watched.close()
        other.close()
        assert watched.problems == []
        assert other.problems and all("401" in p for p in other.problems), other.problems
    finally:
        fresh.stop()


def test_hook_activity_names_the_injected_memories(browser: Any, served: Served) -> None:
    watched = Watched(browser, served=served)
    page = watched.open(f"{served.url}#/hooks", "ol.injected a")
    injected = page.locator("ol.injected a")
    assert injected.count() >= 1
    first = injected.first.inner_text()
    injected.first.click()
    page.wait_for_selector("#memories .memory")
    assert page.locator("#memories .memory").first.get_attribute("data-id") == first
    watched.shot("hooks-memory")
    watched.close()
    assert watched.problems == []


def test_forget_a_memory_then_its_document_after_confirming(browser: Any, served: Served) -> None:
    listed = httpx.get(f"{served.url}v1/banks/demo/documents", headers=served.headers)
    documents = listed.json()["documents"]
    other = next(d["id"] for d in documents if d["id"] != SESSION_ID)
    watched = Watched(browser, served=served)
    page = watched.open(f"{served.url}#/memories?bank=demo&document={other}", "#memories .memory")
    count = page.locator("#memory-count").inner_text()
    total = int(count.split()[0].replace(",", ""))
    first = page.locator("#memories .memory").first.get_attribute("data-id")
    page.locator("#memories .memory").first.get_by_text("Forget memory").click()
    assert page.locator("#confirm").is_visible()
    page.click("#confirm button[value=cancel]")  # cancelling forgets nothing
    assert page.locator(f"[data-id='{first}']").count() == 1
    page.locator("#memories .memory").first.get_by_text("Forget memory").click()
    page.click("#confirm-ok")
    page.wait_for_selector(f"[role=status]:has-text('Forgot memory {first}')")
    assert page.locator(f"[data-id='{first}']").count() == 0
    assert page.locator("#memory-count").inner_text().startswith(f"{total - 1:,} ")
    gone = httpx.get(f"{served.url}v1/banks/demo/memories/{first}", headers=served.headers)
    assert gone.status_code == 404
    page.locator("#memories .memory").first.get_by_text("Forget document").click()
    assert other in page.locator("#confirm-text").inner_text()
    page.keyboard.press("Escape")  # the dialog closes from the keyboard too, forgetting nothing
    assert page.locator("#memories .memory").count() > 0
    page.locator("#memories .memory").first.get_by_text("Forget document").click()
    page.click("#confirm-ok")
    page.wait_for_selector("p.empty")
    assert "No memory matches" in page.locator("p.empty").inner_text()
    listed = httpx.get(f"{served.url}v1/banks/demo/documents", headers=served.headers)
    remaining = listed.json()["documents"]
    assert [d["id"] for d in remaining] == [SESSION_ID]
    watched.shot("memories-forgotten")
    watched.close()
    # The document filter still names the forgotten document: no request failed for it.
    assert watched.problems == []


def test_with_keys_the_page_asks_for_one_and_sees_only_its_bank(
    browser: Any, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    lamina(home, "retain", str(CLAUDE_CODE / "drmaciver-python-to-rust-port.jsonl"),
           "--bank", "alpha")  # fmt: skip
    lamina(home, "retain", str(CLAUDE_CODE / "spotter-258c7280.subagent-acompact-fffbd0.jsonl"),
           "--bank", "beta")  # fmt: skip
    key = json.loads(lamina(home, "keys", "create", "alpha-reader", "--bank", "alpha", "--json"))
    server = Served(home)
    try:
        watched = Watched(browser)
        page = watched.open(server.url, "#api-key")
        watched.shot("key-asked")
        page.fill("#api-key", "lam_not_a_key")
        page.press("#api-key", "Enter")
        page.wait_for_selector("text=That key was refused")
        page.fill("#api-key", key["key"])
        page.press("#api-key", "Enter")
        page.wait_for_selector(".card")
        assert page.locator(".card h3").all_inner_texts() == ["alpha"]
        options = page.locator("#bank-select option").all_inner_texts()
        assert options == ["alpha"]
        page.goto(server.url + "#/memories?bank=beta")  # another bank is not there for it
        page.wait_for_selector("#memories .memory")
        assert "Memories of alpha" in page.locator("main h2").inner_text()
        watched.shot("key-given")
        watched.close()
        # Only the refused attempts failed: no key, then a wrong one.
        assert all("401" in p for p in watched.problems), watched.problems
        assert watched.problems
    finally:
        server.stop()


def test_screenshots_folder_is_ignored_by_git() -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "check-ignore", "-q", "artifacts/inspector/banks-laptop.png"],
                         cwd=ROOT, check=False)  # fmt: skip
    assert out.returncode == 0
