"""The permission gate: a pure verdict on every tool call before any card reaches the phone.

The reference bridge auto-allows every tool call in mode ``default``. This bridge puts a risk gate
in front of ``can_use_tool``, with the Desiide risk gate's labels: a **deny list** that blocks in
every mode and **floors** that always need a phone card.

Decision table (the first row that matches wins)::

    labels on the call                      default   acceptEdits   plan    other mode
    any deny_list:<rule>                    block     block         block   block
    any floor, or loop_detected             ask       ask           ask     ask
    none, tool in PLAN_SAFE_TOOLS           allow     allow         allow   ask
    none, a file edit (FILE_WRITE_TOOLS)    allow     allow         ask     ask
    none, any other tool (Bash, MCP, …)     allow     ask           ask     ask

``default`` auto-allows every call without labels, as the reference bridge does. ``acceptEdits``
auto-allows what its name says and no more: reads, and edits of files inside the session's folder
(an edit without a label is one: outside it is ``outside_workspace`` or a deny rule). A command and
every other tool that can change something (Bash, MCP tools, …) is a card — approving a plan with
key 1 switches to ``acceptEdits``, and that must not silently let every command run. ``plan``
never auto-allows a tool that could change something (Write, Edit, Bash, MCP tools, …): Claude
Code enforces plan mode itself, and the gate never undercuts it. ``bypassPermissions`` (coerced to
``default`` by the bridge) is treated as ``default``; any other mode as the strictest.

The same verdict answers Claude Code's ``PreToolUse`` hook, which sees every tool call (also the
ones Claude Code would allow by itself): :func:`.pre_tool.pre_tool_verdict` turns it into the
hook's answer, with one failure policy — when the gate cannot judge a call, it asks; when the
session is unknown, it denies. Its module docstring has that table.

Where a call may go (:mod:`.paths`): **reads** anywhere under the configured workspace roots;
**writes** only under the session's own folder (its cwd, the folder it was created in — the one
place the sandbox leaves writable), so writing ``~/.bashrc`` from a session in ``~/proj`` is
``outside_workspace`` even when the root is ``~``. **Hidden paths** (the bridge home, its key and
token files, ``~/.ssh``, ``~/.aws``, browser profiles, …: ``GateContext.secrets``, the list the
sandbox hides) are neither, whatever the roots: naming one is ``deny_list:secret_path``.

Deny rules (``deny_list:<rule>``, block in every mode):

* ``secret_path`` — any call that names a hidden path or a path below one: the file tools'
  paths (and a Glob pattern that can match one), and every word of a shell command — arguments
  of any program, ``name=value`` and ``--opt=value`` values, redirect targets, ``cd`` targets
  (``cd ~/.codedeck && cat bridge.db``), link targets (``ln -s ~/.ssh k``), globs that can match
  one (``cat ~/.ss?/id_rsa``; bash's ``*`` skips a leading dot). A path that is only an ancestor
  of a hidden one is not (``grep -r x ~``, Glob ``~/**``): refusing those would refuse every
  search of the home, and the sandbox hides the content anyway.
* ``rm_rf`` — recursive delete of ``/``, the home or an ancestor of it, a workspace root or the
  session's folder itself or an ancestor of one, or any path outside the workspace roots (also
  ``rm -rf /*``, ``rm -rf ~/*``, ``cd / && rm -rf *``, ``{rm,-rf,/}``, and ``mv`` of ``/``,
  ``~`` or a root). Inside the session's folder it is an ordinary call; inside the roots but
  outside the folder (``rm -rf ../other-proj/build``) it is ``outside_workspace``, a card: the
  user may mean it, and nothing irreplaceable outside their workspace is at stake.
* ``mkfs`` — mkfs, mkfs.*, mke2fs, mkswap, mkdosfs, mkntfs, mkexfatfs, wipefs, newfs*.
* ``dd_device`` — a write to a device node under /dev (``dd of=/dev/sda``, and any redirect,
  tee, cp or Write into one); /dev/null, /dev/zero, /dev/std*, /dev/tty, /dev/fd/* are fine.
* ``fork_bomb`` — a function that calls itself in a pipeline or in the background.
* ``curl_pipe_sh`` — curl, wget, fetch, http(ie), xh piped into an interpreter that reads its
  program from stdin (sh, bash, zsh, dash, fish, xonsh, python, perl, ruby, node, php, tclsh,
  expect, guile, sbcl, pwsh, ``sed -f -``, ``make -f -``, …, also behind sudo, ``env -S`` or
  ``busybox``), or a download given to one as code: ``bash <(curl …)``, ``sh -c "$(curl …)"``,
  ``eval "$(wget …)"``, ``source <(curl …)``; or a file the same line downloaded (``curl -o
  x.sh``, ``curl -O URL`` and ``wget URL`` under the URL's name, ``curl … > x.sh``, ``curl … |
  tee x.sh``) and then runs (``sh x.sh``, ``bash < x.sh``, ``source x.sh``, ``./x.sh``).
* ``force_push_protected`` — ``git push`` or ``git send-pack`` with ``-f``/``--force``/
  ``--force-with-lease``/``--force-if-includes`` (any abbreviation git accepts: ``--force-w``),
  ``--mirror`` (or ``-c remote.<r>.mirror=true``), a ``+refspec`` (also from ``-c
  remote.<r>.push``), ``--all`` with force, ``--prune`` over a glob, or a delete (``--delete``,
  ``--dele``, ``:branch``), whose destination is main, master, production or release*, or
  cannot be told (no refspec, ``HEAD``, a variable, a glob such as ``refs/heads/*``).
* ``chmod_system``, ``chown_system``, ``chgrp_system`` — on ``/``, a system directory or a
  device, or recursively on the home or an ancestor of it.
* ``find_delete_system`` — ``find`` over ``/``, a system directory or the home with ``-delete``
  or ``-exec rm …`` (also ``find / … | xargs rm``).
* ``system_write`` — writes (redirects, tee, cp/mv/install/ln/rsync destinations, touch, mkdir,
  truncate, sed -i, rm of a file, curl -o, wget -O, Write/Edit/MultiEdit/NotebookEdit) into /etc,
  /usr, /boot, /bin, /sbin, /lib*, /var (not /var/tmp, /var/folders), /sys, /proc, and macOS's
  /private/etc, /private/var, /System, /Library — outside the workspace roots (inside a root
  but outside the session's folder it is ``outside_workspace``).
* ``shutdown`` — shutdown, reboot, halt, poweroff, ``systemctl``/``loginctl`` poweroff, reboot,
  halt, suspend, hibernate, …, ``init 0|6``, ``telinit 0|6``.

Floors (at least ``ask``):

* ``outside_workspace`` — file tools: Write/Edit/MultiEdit/NotebookEdit of any path outside the
  session's folder, and Read/NotebookRead/LS/Glob/Grep of any path outside the workspace roots
  (a read outside is a privacy leak: another project's .env). Shell: a ``cd`` out of the roots, a
  redirect or write target outside the session's folder (``touch ~/outside``, ``chmod`` of a
  sibling project), a link whose target is outside the folder (``ln -s ~ h``: writes through it
  would land outside), an argument that looks like a path (absolute, ``~``, or climbing with
  ``..``) outside the roots, a program run from outside them (system bin directories excepted),
  and any path the checker cannot resolve where it matters (``rm -rf "$DIR"``, ``cd "$X"``).
* ``command_substitution`` — ``$(…)``, backquotes, ``<(…)``, ``>(…)`` wherever bash runs them:
  not inside single quotes — but single quotes do not quote inside ``"${x:-'…'}"``,
  ``$(( '…' ))`` or an unquoted heredoc — and also in ``${x:-<(…)}`` and after ``~`` (``~$(…)``).
* ``privileged`` — sudo (any options, ``-E`` included), sudoedit, su, doas, pkexec, run0.
* ``background_process`` — ``&``, nohup, setsid, disown, coproc, ``sudo -b``, ``screen -dm``,
  ``tmux new -d``, and the Bash tool's ``run_in_background``.
* ``unparsable_command`` — anything the lexer/parser cannot split safely (unterminated quotes,
  a missing heredoc body, zsh-only syntax, ``$[ … ]``, nesting too deep, a line over 256 KiB),
  a command name only known at run time (``$CMD args``, ``git $SUB``, ``xargs -I{} {}``), a
  sourced file only known at run time, a wrapper whose options cannot be read, a sed script the
  parser cannot follow, a long option of rm/chmod/chown/chgrp/git push that matches none of the
  program's (:mod:`.commands.long_options`), or a Bash input without a string command.
* ``inline_code`` — ``python -c``, ``node -e``/``-p``, ``perl -e``, ``ruby -e``, ``php -r``,
  ``lua -e``, ``osascript -e``, ``Rscript -e``, ``bash``/``sh``/``zsh``… ``-c``, ``su -c``,
  ``eval``, an interpreter fed its program through a pipe, heredoc or here-string
  (``python3 <<EOF``), a file this line wrote and then runs (``echo … > x.sh; bash x.sh``), a
  local program run after the line unpacked a download (``curl … | tar x && ./install.sh``), a
  write into ``.git/hooks/`` or ``.git/config``, ``npm config set script-shell``…, awk programs that run commands, read or write
  files (``system()``, ``|``, ``print >``, ``getline <``), sed's ``e`` and ``s///e``, editor and
  debugger commands (``vim -c``/``+cmd``/``-S``, ``emacs --eval``, ``gdb -ex``), ``make
  --eval``, ``ssh`` with a remote command or ``-o ProxyCommand``/``LocalCommand``/``-F``,
  ``at``/``batch``/``crontab``, ``systemd-run --on-*``, ``tmux send-keys``/``run-shell``,
  ``screen -X``, ``parallel`` filled from its input, settings that run code later
  (:mod:`.commands.hooks`): ``alias``, ``trap``, ``GIT_SSH_COMMAND=…``/``PAGER=…`` with more than a
  program name, ``LD_PRELOAD``/``LD_AUDIT``/``LD_LIBRARY_PATH``/``GCONV_PATH``/``BASH_ENV``/
  ``ENV``/``SHELLOPTS``/``BASHOPTS``/``NODE_OPTIONS``…, ``BASH_FUNC_*``, ``PS0``–``PS4`` holding
  an expansion, ``enable -f``, ``hash -p``, ``git -c core.pager=…``, ``git --exec-path=``,
  ``git config`` of any key that holds a command (pager, editor, sshCommand, fsmonitor,
  hooksPath, ``alias.*``, filter and diff drivers, credential helpers, ``remote.*.mirror``, …);
  and text bash evaluates as code (:mod:`.commands.deferred`) unless every value in it is a literal or an
  integer this line assigned: ``(( x ))``, ``$(( x ))``, ``let``, ``[[ x -eq 1 ]]``, subscripts
  (``a[i]=1``, ``${a[i]}``, ``printf -v``/``read``/``unset``/``declare`` of ``a[…]``),
  ``declare -i``/``-n``, ``${x@P}``, ``${!x}``, substring offsets. Literal code inside any of
  these is checked too: a deny rule in it still blocks.

Commands that options or scripts run are judged like command lines of their own when they are
literals (``tar --to-command='rm -rf ~'`` is ``rm_rf``) and ``inline_code`` when they are not:
``find -exec``/``-execdir``/``-ok`` (``{}`` is an unknown path under roots outside the
workspace), ``xargs``, ``git rebase -x``, ``git submodule foreach``, ``git bisect run``, ``git
filter-branch --*-filter``, ``--upload-pack``/``--receive-pack``, ``git difftool -x``, ``git grep
-O``, ``tar --checkpoint-action=exec=``/``--to-command``/``-I``/``--rsh-command``/``-F``, ``rsync
-e``/``--rsync-path``, sed ``e COMMAND``, ``strace -o '|cmd'``, ``script -c``, ``sg``/``runuser``
``-c``, ``entr -s``, ``watch``, ``env -S``, ``man -P``, ``zip -TT``, ``nc -e``/``-c``, socat
``EXEC:``/``SYSTEM:``. sed's ``w``/``W`` files are write targets and its
``r``/``R`` files read targets; ``tar -x -C dir`` writes there. GNU long options are resolved the
way the programs resolve them: a unique prefix is the option (``rm --recu``, ``chmod --rec``,
``git push --dele``), and an ambiguous one stands for every option it could be, so a prefix of a
dangerous option is always that option (:mod:`.commands.long_options`).

``loop_detected`` (at least ``ask``): the same exact call three times in a row; see
:mod:`.history`.

Shell lines are parsed by our own bash lexer and parser (:mod:`.shell`), not
``shlex``: every simple command of the line is checked — lists, pipelines, subshells, groups,
if/while/for/case bodies, function bodies, substitutions, ``sh -c`` and ``eval`` strings — after
looking through wrappers (:mod:`.commands.wrappers`: sudo, env, command, builtin, exec, nice, time,
timeout, xargs, nohup, setsid, stdbuf, ionice, watch, flock, taskset, chrt, strace, ltrace,
script, unshare, nsenter, chroot, setpriv, capsh, numactl, cgexec, firejail, proot, faketime,
catchsegv, valgrind, caffeinate, systemd-inhibit, systemd-run, xvfb-run, dbus-run-session,
chronic, fakeroot, uv/poetry/pipenv run, …). The verdict is the worst over them.

The lexer follows bash's expansion order where it matters for the verdict: brace expansion first
(``{~,x}`` is the home, ``$HOME{a,b}`` is two unknown variables), then tilde and parameters. zsh
spellings that bash reads differently are taken the zsh way when that is the riskier reading
(``=rm`` runs rm; ``$~X`` is a variable); other zsh-only syntax is ``unparsable_command``.

Known limits of a lexical, pure check: symlinks are not followed; functions and aliases defined
outside the line are unknown; scripts and build files run by name (``./build.sh``, ``npm test``,
``make``, ``sed -f x.sed``, ``vim -es < x.vim``) are not read, nor files written by an earlier
tool call, nor config a previous call stored (a ``remote.*.mirror`` set before makes a later
plain ``git push`` a mirror push); code inside ``python -c`` is flagged, not analysed; ``ssh host
cmd`` runs elsewhere and is only flagged; ``npx``/``uvx``-style runners that fetch a package
and run it are ordinary commands; a long option of a program outside the tables, or one the
tables do not list, is read as written; arithmetic on a variable set outside the line is code,
even when it holds a number.

The package: the verdict at the top (``decide``, ``pre_tool``, ``labels``, ``context``, ``paths``,
``history``, ``line_memory``, ``editor_calls``); :mod:`.shell` reads a shell line (lexer, parser,
words, the check over every command); :mod:`.commands` models what each program does. It is its
own package because the engine, the agent drivers, the runtime's hook and the editor all consult
it, and it imports nothing of the project.
"""

from bridge.gate.decide import (
    ACCEPT_EDITS_TOOLS,
    AUTO_ALLOW_MODES,
    FILE_READ_TOOLS,
    FILE_WRITE_TOOLS,
    PLAN_SAFE_TOOLS,
    GateContext,
    evaluate,
)
from bridge.gate.history import LOOP_THRESHOLD, CallHistory, call_key
from bridge.gate.labels import (
    ALL_LABELS,
    DENY_PREFIX,
    DENY_RULES,
    FLOOR_LABELS,
    LOOP_LABEL,
    GateDecision,
    Outcome,
    deny_label,
    describe_decision,
    describe_reason,
    order_labels,
)
from bridge.gate.pre_tool import (
    CARD_TOOLS,
    GATE_FAILED_REASON,
    UNKNOWN_SESSION_REASON,
    HookDecision,
    PreToolVerdict,
    SessionFacts,
    pre_tool_verdict,
)
from bridge.gate.shell.check import check_shell

__all__ = [
    "ACCEPT_EDITS_TOOLS",
    "ALL_LABELS",
    "AUTO_ALLOW_MODES",
    "CARD_TOOLS",
    "DENY_PREFIX",
    "DENY_RULES",
    "FILE_READ_TOOLS",
    "FILE_WRITE_TOOLS",
    "FLOOR_LABELS",
    "GATE_FAILED_REASON",
    "LOOP_LABEL",
    "LOOP_THRESHOLD",
    "PLAN_SAFE_TOOLS",
    "UNKNOWN_SESSION_REASON",
    "CallHistory",
    "GateContext",
    "GateDecision",
    "HookDecision",
    "Outcome",
    "PreToolVerdict",
    "SessionFacts",
    "call_key",
    "check_shell",
    "deny_label",
    "describe_decision",
    "describe_reason",
    "evaluate",
    "order_labels",
    "pre_tool_verdict",
]
