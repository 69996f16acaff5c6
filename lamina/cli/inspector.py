"""`lamina inspect`: the web inspector on a loopback port of its own (see
lamina.integrations.http_inspect for its pages)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import click

from ..errors import InputError
from .common import open_bank, server_token, settings

__all__ = ["inspect"]


def _can_open_browser() -> bool:
    """Whether a graphical browser can be opened here (not a terminal one in this terminal)."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


_REDIRECT = """<!doctype html><meta charset="utf-8">
<meta http-equiv="refresh" content="0;url={target}">
<title>Lamina inspector</title><p><a href="{target}">Open the Lamina inspector</a></p>
"""


def _redirect_file(home: Path, url: str) -> Path:
    """A page (mode 0600, in the data directory's private run folder) that sends the browser
    on to `url`: the browser is started with this file's path, never with the login code,
    which any user could read in the browser's command line."""
    from html import escape

    from ..owned import private_dir, write_private

    page = private_dir(home / "run") / f"inspect-{os.getpid()}.html"
    write_private(page, _REDIRECT.format(target=escape(url, quote=True)))
    return page


@click.command()
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port on 127.0.0.1 (0: a free one).",
)
@click.option("--no-browser", is_flag=True, help="Only print the address; open no browser.")
@click.pass_context
def inspect(ctx: click.Context, port: int, no_browser: bool) -> None:
    """Look inside the memory banks in a browser: banks, memories, recall, context logs, hooks.

    Serves the inspector and the HTTP API on 127.0.0.1 only and prints the address (opening a
    browser when this machine has a display). Without API keys the address holds a one-time
    login code, which the browser trades for a session cookie: other users of this machine
    cannot get in. With API keys, the page asks for one and shows only that key's banks.
    Stop it with Ctrl-C.

    No --json: it serves a browser until stopped; the address it prints is its only output.

    Example: lamina inspect --no-browser
    """
    try:
        import uvicorn

        from ..integrations.http import create_app
    except ImportError:
        raise InputError("the inspector needs: pip install 'lamina[server]'") from None
    from ..access import Gate

    memory = open_bank(ctx)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise InputError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    base = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    token, token_file = server_token(ctx, memory.store)
    gate = Gate.at_start(memory.store, "127.0.0.1", token=token)
    url = f"{base}?token={gate.login_code()}" if gate.open else base
    home = settings(ctx).home
    app = create_app(home, memory=memory, gate=gate)
    click.echo(url)
    described = gate.describe(token_file)
    click.echo(f"lamina inspect: serving on {base} ({described}); Ctrl-C stops", err=True)
    opener = None
    if not no_browser and _can_open_browser():
        import webbrowser

        opener = _redirect_file(home, url)
        webbrowser.open(opener.as_uri())
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    try:
        server.run(sockets=[sock])
    finally:
        if opener is not None:
            opener.unlink(missing_ok=True)
