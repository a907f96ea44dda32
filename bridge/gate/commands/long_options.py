"""GNU long options by program, and how an abbreviated one is read.

``getopt_long`` (coreutils, sed, tar, wget, …), git's parse-options and curl 7 all accept any
unique prefix of a long option: ``rm --recu`` is ``rm --recursive``, ``git push --force-w`` is
``--force-with-lease``. A rule that matched the full spelling only would pass the short one, so
every rule that reads long options resolves them against its program's table first.

Resolution is deliberately pessimistic: an exact name is itself; otherwise the name stands for
*every* option it is a prefix of. The program itself would refuse an ambiguous prefix, but taking
all of them means a prefix of a dangerous option is always that option, and no reading of the
table can turn a dangerous spelling into a harmless one. A name that matches nothing is unknown;
the rules of programs whose options can destroy (:data:`STRICT`) ask about it rather than guess.
``--no-X`` is the negation of ``X`` (git's parse-options accepts it for most options), which only
turns something off.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["LONG_OPTIONS", "STRICT", "resolve_long"]


def _table(names: str) -> frozenset[str]:
    return frozenset("--" + name for name in names.split())


_COREUTILS = "help version"
_PERMISSIONS = (
    f"{_COREUTILS} changes silent quiet verbose no-preserve-root preserve-root reference recursive "
    "dereference no-dereference from"
)
_CP_MV = (
    f"{_COREUTILS} archive attributes-only backup copy-contents debug force interactive link "
    "dereference no-clobber no-dereference preserve no-preserve parents recursive reflink "
    "remove-destination sparse strip-trailing-slashes symbolic-link suffix target-directory "
    "no-target-directory update verbose one-file-system context keep-directory-symlink exchange "
    "no-copy"
)

_WRAPPERS = (
    ("timeout", "foreground kill-after preserve-status signal verbose"),
    ("nice", "adjustment"),
    ("nohup", ""),
    ("env", "ignore-environment null unset chdir split-string block-signal "
            "default-signal ignore-signal list-signal-handling debug"),
    ("stdbuf", "input output error"),
    ("ionice", "class classdata pid pgid ignore uid"),
    ("xargs", "null arg-file delimiter eof replace max-lines max-args open-tty "
              "interactive no-run-if-empty max-chars show-limits verbose exit "
              "max-procs process-slot-var"),
    ("time", "format portability output append verbose quiet"),
    ("sudo", "askpass background bell close-from chdir preserve-env edit group "
             "set-home host login remove-timestamp reset-timestamp list "
             "non-interactive preserve-groups prompt chroot role stdin shell type "
             "command-timeout other-user user validate"),
    ("flock", "shared exclusive unlock nonblock no-fork timeout wait "
              "conflict-exit-code close command fcntl verbose"),
    ("watch", "beep color no-color differences errexit exec chgexit equexit interval "
              "precise no-rerun no-title no-wrap shotsdir"),
    ("setsid", "ctty fork wait"),
    ("taskset", "all-tasks pid cpu-list"),
    ("chrt", "all-tasks batch deadline fifo idle other rr reset-on-fork max pid "
             "sched-runtime sched-period sched-deadline verbose"),
)  # fmt: skip
"""Wrappers (:mod:`.wrappers`) and their long options."""

LONG_OPTIONS: Mapping[str, frozenset[str]] = {
    "rm": _table(
        f"{_COREUTILS} force interactive one-file-system no-preserve-root preserve-root "
        "recursive dir verbose"
    ),
    "chmod": _table(_PERMISSIONS),
    "chown": _table(_PERMISSIONS),
    "chgrp": _table(_PERMISSIONS),
    "cp": _table(_CP_MV),
    "mv": _table(_CP_MV),
    "install": _table(
        f"{_COREUTILS} backup compare debug directory group mode owner preserve-timestamps strip "
        "strip-program suffix target-directory no-target-directory verbose preserve-context "
        "context"
    ),
    "ln": _table(
        f"{_COREUTILS} backup directory force interactive logical no-dereference physical "
        "relative symbolic suffix target-directory no-target-directory verbose"
    ),
    "rsync": _table(
        f"{_COREUTILS} verbose info debug stderr quiet no-motd checksum archive recursive "
        "relative no-implied-dirs backup backup-dir suffix update inplace append append-verify "
        "dirs old-dirs mkpath links copy-links copy-unsafe-links safe-links munge-links "
        "copy-dirlinks keep-dirlinks hard-links perms executability chmod acls xattrs owner "
        "group devices copy-devices write-devices specials times atimes open-noatime crtimes "
        "omit-dir-times omit-link-times super fake-super sparse preallocate dry-run whole-file "
        "checksum-choice one-file-system block-size rsh rsync-path existing ignore-existing "
        "remove-source-files delete delete-before delete-during delete-delay delete-after "
        "delete-excluded ignore-missing-args delete-missing-args ignore-errors force "
        "max-delete max-size min-size max-alloc partial partial-dir delay-updates prune-empty-dirs "
        "numeric-ids usermap groupmap chown timeout contimeout ignore-times size-only modify-window "
        "temp-dir fuzzy compare-dest copy-dest link-dest compress compress-choice compress-level "
        "skip-compress cvs-exclude filter exclude exclude-from include include-from files-from "
        "from0 old-args secluded-args trust-sender copy-as address port sockopts blocking-io "
        "outbuf stats 8-bit-output human-readable progress itemize-changes remote-option "
        "out-format log-file log-file-format password-file early-input list-only bwlimit "
        "stop-after stop-at fsync write-batch only-write-batch read-batch protocol iconv "
        "checksum-seed ipv4 ipv6"
    ),
    "sed": _table(
        f"{_COREUTILS} quiet silent debug expression file follow-symlinks in-place line-length "
        "posix regexp-extended separate sandbox unbuffered null-data zero-terminated"
    ),
    "tar": _table(
        f"{_COREUTILS} catenate concatenate create delete diff compare append list test-label "
        "update extract get add-file directory exclude exclude-backups exclude-caches "
        "exclude-caches-all exclude-caches-under exclude-ignore exclude-ignore-recursive "
        "exclude-tag exclude-tag-all exclude-tag-under exclude-vcs exclude-vcs-ignores "
        "exclude-from files-from file force-local gzip gunzip bzip2 xz lzip lzma lzop zstd "
        "compress uncompress auto-compress use-compress-program checkpoint checkpoint-action "
        "to-command to-stdout info-script new-volume-script rsh-command rmt-command keep-old-files "
        "keep-newer-files overwrite overwrite-dir recursive-unlink remove-files unlink-first "
        "skip-old-files strip-components transform xform absolute-names dereference "
        "hard-dereference one-file-system owner group mode mtime numeric-owner preserve "
        "preserve-permissions same-permissions preserve-order same-order same-owner "
        "no-same-owner no-same-permissions sort verbose verify totals touch wildcards "
        "no-wildcards anchored no-anchored null no-null blocking-factor record-size "
        "ignore-zeros format old-archive portable posix pax-option label multi-volume "
        "tape-length sparse sparse-version incremental listed-incremental level "
        "no-recursion recursion selinux acls xattrs xattrs-include xattrs-exclude warning "
        "show-transformed-names show-stored-names show-defaults quiet restrict backup suffix "
        "occurrence ignore-case no-ignore-case ignore-command-error no-ignore-command-error "
        "seek no-seek interactive confirmation index-file utc delay-directory-restore "
        "no-delay-directory-restore check-device no-check-device starting-file after-date "
        "newer newer-mtime hole-detection block-number checkpoint"
    ),
    "curl": _table(
        f"{_COREUTILS} output output-dir remote-name remote-name-all remote-header-name "
        "create-dirs config upload-file data data-raw data-binary data-urlencode data-ascii "
        "json form form-string header user request user-agent referer cookie cookie-jar "
        "range write-out proxy max-time connect-timeout retry url cert key cacert "
        "dump-header trace trace-ascii stderr etag-save etag-compare hsts alt-svc "
        "location silent show-error fail verbose insecure include head compressed netrc "
        "netrc-file libcurl"
    ),
    "wget": _table(
        f"{_COREUTILS} output-document output-file append-output directory-prefix "
        "user-agent tries timeout input-file header post-data post-file body-file body-data "
        "execute config quiet verbose no-verbose continue timestamping no-clobber "
        "recursive level mirror page-requisites convert-links no-parent save-cookies "
        "load-cookies save-headers content-disposition trust-server-names default-page "
        "backups backup-converted adjust-extension"
    ),
    "make": _table(
        f"{_COREUTILS} always-make directory debug environment-overrides eval file makefile "
        "ignore-errors include-dir jobs keep-going load-average max-load check-symlink-times "
        "just-print dry-run recon old-file assume-old output-sync print-data-base question "
        "no-builtin-rules no-builtin-variables shuffle silent quiet no-silent stop "
        "no-keep-going touch trace print-directory no-print-directory what-if new-file "
        "assume-new warn-undefined-variables jobserver-style jobserver-auth"
    ),
    "git push": _table(
        "help all branches prune mirror dry-run porcelain delete tags follow-tags signed "
        "atomic push-option receive-pack exec force-with-lease force-if-includes force repo "
        "set-upstream thin quiet verbose progress recurse-submodules verify no-verify ipv4 ipv6"
    ),
    "git send-pack": _table(
        "help all dry-run force receive-pack exec verbose thin atomic mirror quiet "
        "stateless-rpc stdin helper-status signed push-option progress force-with-lease "
        "force-if-includes"
    ),
    "git rebase": _table(
        "help onto keep-base continue abort quit edit-todo show-current-patch apply merge "
        "strategy strategy-option rerere-autoupdate no-rerere-autoupdate quiet verbose stat "
        "no-stat verify no-verify committer-date-is-author-date ignore-date reset-author-date "
        "signoff gpg-sign no-gpg-sign whitespace ignore-whitespace interactive rebase-merges "
        "exec root autosquash no-autosquash autostash no-autostash reschedule-failed-exec "
        "no-reschedule-failed-exec update-refs no-update-refs fork-point no-fork-point "
        "empty keep-empty no-keep-empty reapply-cherry-picks no-reapply-cherry-picks "
        "allow-empty-message context skip no-ff force-rebase"
    ),
    **{name: _table(f"{_COREUTILS} {options}") for name, options in _WRAPPERS},
}
"""Each program's long options (git subcommands as ``git <sub>``), full names with ``--``."""

STRICT = frozenset({"rm", "chmod", "chown", "chgrp", "git push", "git send-pack"})
"""Programs whose table is complete and whose options can destroy: an unknown long option is
``unparsable_command`` (a newer version's option, or a spelling the gate does not read). The
wrappers with a table are strict too (:mod:`.wrappers`): an option they cannot read may take a
value, and then the command they run is not the word the gate would look at."""


def resolve_long(name: str, known: frozenset[str]) -> tuple[str, ...]:
    """The options ``name`` (``--recu``) stands for in ``known``; empty when it is unknown.

    An exact name is itself; otherwise every option it is a prefix of (see the module
    docstring); ``--no-X`` resolves to ``--no-`` plus what ``--X`` resolves to.
    """
    if name in known:
        return (name,)
    matches = tuple(sorted(option for option in known if option.startswith(name)))
    if matches or not name.startswith("--no-") or len(name) <= 5:
        return matches
    return tuple("--no-" + option[2:] for option in resolve_long("--" + name[5:], known))
