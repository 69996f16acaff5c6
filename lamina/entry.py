"""The `lamina` executable. `lamina [--home DIR] hook`, which Claude Code runs around every
prompt and turn, takes a short path that skips importing the whole command line (about 140 ms
less per hook), and a prompt that a warm server answers loads only a few standard modules
(lamina.integrations.claude_code.warm_client); `lamina mcp` on stdio starts as a relay that
answers `initialize` at once (`lamina.integrations.mcp_stdio`); `lamina compile` with plain
options is parsed without click (`lamina.cli.compiling`); everything else goes to
`lamina.cli`."""

from __future__ import annotations

import sys

__all__ = ["main"]


def _hook_home(args: list[str]) -> tuple[bool, str | None]:
    """Whether the arguments are exactly a hook call, and its --home if given."""
    if "hook" not in args:
        return False, None
    rest = list(args)
    rest.remove("hook")  # --home may stand before or after the command, as for every command
    if not rest:
        return True, None
    if len(rest) == 2 and rest[0] == "--home" and args.index("hook") != 1:
        return True, rest[1]
    if len(rest) == 1 and rest[0].startswith("--home="):
        return True, rest[0].split("=", 1)[1]
    return False, None


def main() -> None:
    import os

    # numpy's OpenBLAS runs a matrix product on a thread per core, and its threads busy-wait
    # between products. Lamina's products are matrix-vector ones over memory-bound data (the
    # vector scan of a recall), which a second thread does not speed up: it doubled the CPU of
    # a recall at 100k memories and, on a shared machine, lengthened it. Set before numpy loads;
    # a value the user chose stands.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    is_hook, home = _hook_home(sys.argv[1:])
    if is_hook:  # first: every prompt pays for what comes before it
        from . import __version__
        from .integrations.claude_code.warm_client import answer_hook

        stdin = sys.stdin.read()
        output, reason = answer_hook(stdin, home, __version__)
        if output is not None:
            try:
                if output:
                    sys.stdout.write(output + "\n")
                sys.stdout.flush()
            finally:
                os._exit(0)
        from .integrations.claude_code.hook import hook_main

        hook_main(stdin, home=home, warm_tried=reason or None)
    # Only a command line holding `mcp` can be one (the relay's module imports subprocess).
    if "mcp" in sys.argv[1:] and not os.environ.get("LAMINA_MCP_DIRECT"):
        from .integrations.mcp_stdio import is_stdio_mcp, relay

        if is_stdio_mcp(sys.argv[1:]):
            code = relay(sys.argv[1:])
            # Not sys.exit: the relay's reader thread may sit in a read of stdin, and an
            # interpreter shutting down under it aborts (SIGABRT) instead of exiting.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    if sys.argv[1:2] == ["compile"]:  # a compile's options parsed without click, if plain
        from .cli.compiling import fast_compile

        if fast_compile(sys.argv[2:]):
            return
    from .cli.main import main as cli_main

    cli_main()
