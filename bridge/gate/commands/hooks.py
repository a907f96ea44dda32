"""Settings that make something else run code: env variables, git config keys, alias, trap.

``GIT_SSH_COMMAND='rm -rf ~' git fetch``, ``git -c core.pager='sh -c …' log``, ``alias ls='…'``
and ``trap '…' EXIT`` run nothing themselves, yet the command they set up runs later in the
same line (or session). The gate checks the code they hold like a line of its own (so a deny
rule inside still blocks) and flags ``inline_code`` unless the value is just a program name
(``GIT_EDITOR=true git rebase --continue`` is the everyday case and stays quiet).
Variables that load code into every process (``LD_PRELOAD``, ``BASH_ENV``, ``NODE_OPTIONS``, …)
are ``inline_code`` whatever their value, and so are ``BASH_FUNC_name%%=…`` (a function every
bash below defines) and the ``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n`` pairs. A prompt string
(``PS0``–``PS4``) is code when it holds an expansion: bash expands it each time it prints it, and
``PS4`` is printed before every command under ``set -x``.
"""

from __future__ import annotations

import re

from bridge.gate.context import INLINE, Call, CommandEnv, Scope
from bridge.gate.shell.lexer import Word
from bridge.gate.shell.words import drop_prefix

__all__ = [
    "CODE_VARIABLE_NAMES",
    "COMMAND_VARIABLES",
    "LOADER_VARIABLES",
    "PROMPT_VARIABLES",
    "check_alias",
    "check_assignment",
    "check_git_setting",
    "check_trap",
    "git_key_runs_code",
]

COMMAND_VARIABLES = frozenset(
    {"GIT_SSH_COMMAND", "GIT_SSH", "GIT_PAGER", "PAGER", "MANPAGER", "GIT_EDITOR", "EDITOR",
     "VISUAL", "GIT_SEQUENCE_EDITOR", "GIT_ASKPASS", "SSH_ASKPASS", "SUDO_ASKPASS",
     "GIT_EXTERNAL_DIFF", "GIT_PROXY_COMMAND", "PROMPT_COMMAND", "LESSOPEN", "LESSCLOSE"}
)  # fmt: skip
"""Variables whose value is a command some program runs."""

LOADER_VARIABLES = frozenset(
    {"LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES",
     "DYLD_LIBRARY_PATH", "BASH_ENV", "ENV", "NODE_OPTIONS", "PERL5OPT", "PERL5LIB", "RUBYOPT",
     "PYTHONSTARTUP", "GIT_CONFIG_PARAMETERS", "GIT_EXEC_PATH", "GCONV_PATH", "SHELLOPTS",
     "BASHOPTS", "GIT_CONFIG_COUNT", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_TEMPLATE_DIR",
     "LD_DEBUG_OUTPUT", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "ZDOTDIR"}
)  # fmt: skip
"""Variables that make programs load code from elsewhere (``SHELLOPTS=xtrace`` with ``PS4``)."""

PROMPT_VARIABLES = frozenset({"PS0", "PS1", "PS2", "PS3", "PS4"})
"""Prompt strings: bash expands them (substitutions included) when it prints them, and ``PS4``
is printed for every command under ``set -x``."""

CODE_VARIABLE_NAMES = COMMAND_VARIABLES | LOADER_VARIABLES | PROMPT_VARIABLES
"""Every variable whose value runs or loads code: assigning one by name (``printf -v``,
``read``) from a value the gate cannot see is code for later."""

_CODE_PREFIXES = ("BASH_FUNC_", "GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_")
"""``BASH_FUNC_name%%=() { …; }`` defines a function in every bash started below."""

_GIT_CODE_KEY = re.compile(
    r"core\.(pager|editor|sshcommand|fsmonitor|askpass|hookspath|gitproxy)|sequence\.editor"
    r"|diff\.external|credential\..*helper|gpg(\..+)?\.program|pager\..+|filter\..+|alias\..+"
    r"|diff\..+\.(textconv|command)|merge\..+\.driver|uploadpack\..+|include(if\..+)?\.path"
    r"|remote\..+\.(uploadpack|receivepack|proxy|vcs)|.+\.(command|cmd|helper|program)"
    r"|core\.alternaterefscommand|init\.templatedir|submodule\..+\.update|web\.browser"
    r"|interactive\.difffilter|man\.viewer|sendemail\.(smtpserver|.+cmd)",
    re.IGNORECASE,
)
_PLAIN_PROGRAM = re.compile(r"[\w./+:@%-]*")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_assignment(word: Word, scope: Scope, env: CommandEnv) -> None:
    """``NAME=value`` before a command, after ``env`` or in ``export``/``declare``."""
    name, equals, _ = word.value.partition("=")
    name = name.removesuffix("+")
    if equals and name.startswith(_CODE_PREFIXES):
        env.flag(INLINE)
        return
    if not equals or not _NAME.fullmatch(name):
        return
    value = drop_prefix(word, word.value.index("=") + 1)
    if name in LOADER_VARIABLES:
        env.flag(INLINE)
    elif name in COMMAND_VARIABLES:
        _check_code(value, scope, env)
    elif name in PROMPT_VARIABLES and (
        not value.is_static or "$" in value.value or "`" in value.value
    ):
        env.flag(INLINE)


def git_key_runs_code(key: str) -> bool:
    """True for a git config key whose value is a command (or loads one)."""
    return bool(_GIT_CODE_KEY.fullmatch(key))


def check_git_setting(key: str, value: Word, scope: Scope, env: CommandEnv) -> None:
    """``git -c key=value`` or ``git config key value``: keys that run commands are code."""
    if not _GIT_CODE_KEY.fullmatch(key):
        return
    if key.lower().startswith(("alias.", "core.hookspath", "include")):
        env.flag(INLINE)  # an alias, a hook directory, an included config: code for later
        if not value.value.startswith("!"):
            return
    _check_code(drop_prefix(value, 1) if value.value.startswith("!") else value, scope, env)


def _check_code(value: Word, scope: Scope, env: CommandEnv) -> None:
    if not value.is_static:
        env.flag(INLINE)
        return
    if not _PLAIN_PROGRAM.fullmatch(value.value):
        env.flag(INLINE)
    if value.value:
        env.nested_script(value.value, scope.cwd)


def check_alias(call: Call) -> None:
    """``alias name='code'``: the code runs wherever the name is typed later."""
    call.handled.update(range(len(call.args)))
    for word in call.args:
        name, equals, _ = word.value.partition("=")
        if equals and not name.startswith("-"):
            _check_code(drop_prefix(word, len(name) + 1), call.scope, call.env)


def check_trap(call: Call) -> None:
    """``trap 'code' SIGNAL…``: the code runs when the signal (or EXIT) comes."""
    call.handled.update(range(len(call.args)))
    operands = [word for word in call.args if not word.value.startswith("-")]
    if len(operands) >= 2:
        call.env.flag(INLINE)
        if operands[0].is_static:
            call.env.nested_script(operands[0].value, call.scope.cwd)
