#!/bin/sh
# Install (or upgrade) Lamina from this checkout, for you alone, in one command:
#
#     ./install.sh                 # the lamina command, with the MCP server
#     ./install.sh --claude-code   # and the Claude Code plugin, from this checkout
#
# Lamina goes into its own virtual environment (${XDG_DATA_HOME:-~/.local/share}/lamina-venv)
# and `lamina` into ~/.local/bin, where the Claude Code plugin looks for it even when that
# folder is not on the PATH Claude Code was started with. After `git pull`, run it again to
# upgrade. Nothing outside those two places and (with --claude-code) Claude Code's plugin list
# is touched; no root, no system Python packages.
#
# Settings, all optional: LAMINA_PYTHON (the Python 3.11+ to build the environment with),
# LAMINA_VENV (where the environment goes), LAMINA_BIN_DIR (where `lamina` is linked),
# LAMINA_EXTRAS (default: mcp; e.g. "mcp,server,postgres").
set -eu

here=$(cd "$(dirname "$0")" && pwd -P)
claude_code=0
for arg in "$@"; do
    case "$arg" in
    --claude-code) claude_code=1 ;;
    -h | --help)
        sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *)
        printf 'install.sh: unknown option %s (try --help)\n' "$arg" >&2
        exit 2
        ;;
    esac
done

fail() {
    printf 'install.sh: %s\n' "$*" >&2
    exit 1
}

[ -f "$here/pyproject.toml" ] && [ -d "$here/lamina" ] ||
    fail "$here is not a Lamina checkout (no pyproject.toml and lamina/ beside this script)"
[ -n "${HOME:-}" ] || fail "HOME is not set"

# A Python new enough: the one named, else the newest python3.x on PATH.
python=${LAMINA_PYTHON:-}
if [ -z "$python" ]; then
    for candidate in python3.14 python3.13 python3.12 python3.11 python3; do
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            python=$(command -v "$candidate")
            break
        fi
    done
fi
[ -n "$python" ] || fail "no Python 3.11 or newer on PATH (set LAMINA_PYTHON to one)"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
    fail "$python is older than Python 3.11"
"$python" -c 'import venv, ensurepip' 2>/dev/null ||
    fail "$python cannot make virtual environments (on Debian or Ubuntu: apt install python3-venv)"

venv=${LAMINA_VENV:-${XDG_DATA_HOME:-$HOME/.local/share}/lamina-venv}
bin_dir=${LAMINA_BIN_DIR:-$HOME/.local/bin}
extras=${LAMINA_EXTRAS:-mcp}

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    printf 'Upgrading Lamina in %s\n' "$venv" >&2
else
    printf 'Making a Python environment for Lamina in %s\n' "$venv" >&2
    rm -rf "$venv"
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
# --force-reinstall --no-deps for the checkout itself: the same version number after a
# `git pull` is still new code. Its dependencies are installed (or upgraded) as they need.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$here[$extras]"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$here"

mkdir -p "$bin_dir"
ln -sf "$venv/bin/lamina" "$bin_dir/lamina"
version=$("$bin_dir/lamina" --version 2>/dev/null) || fail "$bin_dir/lamina does not run"
printf 'Installed %s: %s\n' "$version" "$bin_dir/lamina" >&2

if [ "$claude_code" = 1 ]; then
    if command -v claude >/dev/null 2>&1; then
        # The checkout is the marketplace: the plugin is updated from it, never from a network.
        claude plugin marketplace add "$here" >/dev/null 2>&1 ||
            claude plugin marketplace update lamina >/dev/null 2>&1 || true
        claude plugin install lamina@lamina ||
            fail "claude plugin install lamina@lamina failed (see above)"
        printf 'Claude Code plugin installed: the next session remembers.\n' >&2
    else
        printf 'Claude Code (claude) is not on PATH: install it, then run %s --claude-code again,\nor add the hooks to its settings with: lamina install claude-code\n' "$0" >&2
    fi
fi

case ":${PATH:-}:" in
*":$bin_dir:"*) ;;
*)
    printf '\n%s is not on your PATH, so a shell will not find `lamina`. Add it with:\n' "$bin_dir" >&2
    printf '    echo '"'"'export PATH="%s:$PATH"'"'"' >> ~/.profile   # then open a new terminal\n' "$bin_dir" >&2
    printf 'The Claude Code plugin finds %s/lamina without it.\n' "$bin_dir" >&2
    ;;
esac
