"""`lamina inspect`: the web inspector on a loopback port of its own (see
lamina.integrations.http_inspect for its pages)."""

from __future__ import annotations

import os
import socket
import sys

import click

from ..errors import InputError
from .common import open_bank

__all__ = ["inspect"]


def _can_open_browser() -> bool:
    """Whether a graphical browser can be opened here (not a terminal one in this terminal)."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


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
    browser when this machine has a display). With API keys, the page asks for one and shows
    only that key's banks. Stop it with Ctrl-C.

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
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    gate = Gate.at_start(memory.store, "127.0.0.1")
    app = create_app((ctx.find_root().obj or {}).get("home"), memory=memory, gate=gate)
    click.echo(url)
    click.echo(f"lamina inspect: serving on {url} ({gate.describe()}); Ctrl-C stops", err=True)
    if not no_browser and _can_open_browser():
        import webbrowser

        webbrowser.open(url)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    server.run(sockets=[sock])
