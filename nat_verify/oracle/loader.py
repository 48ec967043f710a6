"""Load an iptables-restore text into the node namespace, and reset per-scenario state.

Loading runs ``iptables-restore`` (nf_tables backend) or ``iptables-legacy-restore`` through
``nsenter --net=`` once per ruleset (0.05 s for 1k rules, 0.41 s for 10k with nft; reference
section 5). One backend per oracle: both hook sets would run in one namespace (P14).
"""

from __future__ import annotations

import contextlib
import os
import re

from nat_verify.oracle.netns import in_netns, run_in

BACKENDS = {"nft": "iptables-restore", "legacy": "iptables-legacy-restore"}
_NFACCT = re.compile(r"--nfacct-name\s+(\"[^\"]*\"|\S+)")
_FAILED_LINE = re.compile(r"line:?\s*(\d+)")


class RestoreError(Exception):
    """iptables-restore refused the text; ``line`` is 1-based in the text (0 if unknown)."""

    def __init__(self, message: str, *, source: str, line: int, text: str, stderr: str) -> None:
        self.source = source
        self.line = line
        self.text = text  # the offending line, "" if unknown
        self.stderr = stderr
        where = f"{source}:{line}" if line else source
        detail = f"\n  offending line: {text}" if text else ""
        super().__init__(f"{where}: {message}{detail}")


def nfacct_names(restore_text: str) -> list[str]:
    """Accounting objects a ruleset references; they must exist before the restore (P9)."""
    names = []
    for m in _NFACCT.finditer(restore_text):
        name = m.group(1).strip('"')
        if name not in names:
            names.append(name)
    return names


TABLES = ("raw", "mangle", "nat", "filter")
_TABLE_LINE = re.compile(r"^\*(\S+)\s*$", re.M)
_MISSING_CHAIN = re.compile(r"Chain '([^']+)' does not exist")


def complete_tables(restore_text: str) -> str:
    """``restore_text`` plus an empty ``*table / COMMIT`` for each of raw, mangle, nat, filter
    it does not name.

    iptables-restore only replaces the tables it names, so without this a previous load's
    tables would survive: the node's ruleset is exactly the text. Appended at the end, so line
    numbers of the text are unchanged.
    """
    named = set(_TABLE_LINE.findall(restore_text))
    if not restore_text.endswith("\n"):
        restore_text += "\n"
    return restore_text + "".join(f"*{t}\nCOMMIT\n" for t in TABLES if t not in named)


def _offending_line(err: str, lines: list[str]) -> int:
    m = _FAILED_LINE.search(err)
    line = int(m.group(1)) if m else 0
    # The nft backend reports a jump to a missing chain at the table's COMMIT: point at the
    # first rule that jumps there instead.
    missing = _MISSING_CHAIN.search(err)
    if missing and 0 < line <= len(lines) and lines[line - 1].strip() == "COMMIT":
        target = re.compile(rf"\s-[jg]\s+{re.escape(missing.group(1))}(\s|$)")
        start = line - 1
        while start > 0 and not lines[start - 1].startswith("*"):
            start -= 1
        for i in range(start, line - 1):
            if target.search(lines[i]):
                return i + 1
    return line


def load(
    node_fd: int, restore_text: str, *, backend: str = "nft", source: str = "<restore>"
) -> None:
    """Make the node's iptables ruleset exactly ``restore_text`` (see ``complete_tables``).

    Raises RestoreError with the tool's stderr and the offending line.
    """
    try:
        tool = BACKENDS[backend]
    except KeyError:
        raise ValueError(
            f"backend must be one of {sorted(BACKENDS)}, received {backend!r}"
        ) from None
    for name in nfacct_names(restore_text):
        res = run_in(node_fd, ["nfacct", "add", name])
        # "File exists" after a reload is fine; anything else will surface in the restore.
        if res.returncode != 0 and "exist" not in res.stderr.lower():
            raise RestoreError(
                f"nfacct add {name} failed: {res.stderr.strip()}",
                source=source,
                line=0,
                text="",
                stderr=res.stderr,
            )
    full = complete_tables(restore_text)
    res = run_in(node_fd, [tool], full)
    if res.returncode != 0:
        err = "\n".join(ln for ln in res.stderr.strip().splitlines() if not ln.startswith("Try `"))
        lines = full.splitlines()
        line = _offending_line(err, lines)
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        raise RestoreError(f"{tool} failed: {err}", source=source, line=line, text=text, stderr=err)


CONNTRACK_KEEPER = """table ip nat_verify_conntrack {
    chain keep {
        type filter hook prerouting priority -400; policy accept;
        ct state new counter
    }
}
"""


# The same, as a job for ``Topology(node_jobs=...)`` (runs in parallel with the plumbing).
CONNTRACK_KEEPER_JOB = (["nft", "-f", "-"], CONNTRACK_KEEPER)


def keep_conntrack_on(node_fd: int) -> None:
    """Make conntrack run in the node namespace whatever ruleset is loaded.

    Conntrack, whose NEW events are the oracle's evidence, is only hooked into a namespace
    where something needs it (NAT, a conntrack match); a filter-only ruleset would leave it
    off, and every probe would look like a drop. A separate nftables table with one ``ct``
    match and no verdict (policy accept) turns it on without deciding anything; iptables-save
    and iptables-restore never see or touch it.
    """
    res = run_in(node_fd, ["nft", "-f", "-"], CONNTRACK_KEEPER)
    if res.returncode != 0:
        raise RuntimeError(f"cannot enable conntrack in the node namespace: {res.stderr.strip()}")


def clear_recent(node_fd: int) -> int:
    """Empty every ``-m recent`` list of the node namespace; returns how many lists.

    Affinity state survives a reload of the same ruleset (P10); writing "/" to a list's proc
    file clears it. The file must be opened from inside the namespace.
    """
    count = 0
    with in_netns(node_fd):
        base = "/proc/thread-self/net/xt_recent"
        try:
            names = os.listdir(base)
        except FileNotFoundError:
            return 0
        for name in names:
            with contextlib.suppress(OSError), open(os.path.join(base, name), "w") as f:
                f.write("/\n")
                count += 1
    return count
