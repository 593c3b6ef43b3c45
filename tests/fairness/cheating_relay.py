"""A relay that cheats at fair dice, for tests only: the real ``tablerelay`` server with one cheat patched in.

    .venv/bin/python -m tests.fairness.cheating_relay CHEAT serve --host 127.0.0.1 --port 0 --data DIR

(run from the repository's root; every argument after CHEAT goes to ``tablerelay`` as typed). CHEAT is:

- ``drop``: every witnessed roll leaves out the first witness value (by participant id) from its dice and its
  ``fair`` map, although the witness's frame was acknowledged like any other;
- ``replace``: that value is replaced by other random bytes;
- ``reroll``: every witnessed roll is made with another nonce than the one its ``pending`` event committed to:
  the same intent rolled again after the witnesses answered, as a relay that looked at the dice first would;
- ``unasked``: the first player of each room to offer to witness is never asked to: GM and hidden rolls are
  witnessed by the others, or by nobody;
- ``withhold``: a witnessed roll is announced (its ``pending`` event) and its witnesses answer, but the roll
  is never made: a relay that throws a roll away once it has seen what its dice would be;
- ``honest``: nothing is patched (the same launcher, for a control).

A dropped or replaced value leaves a roll that passes every offline check (``tablerelay verify --fair``
finds nothing wrong with it), and so do the unwitnessed rolls of ``unasked``: only the honest client that
took part can tell (a re-roll is caught offline too, by its pending's commit). Everything else is the real
server, patched at the seams the room rolls through (``relay.core.fairness.transcript``,
``relay.core.fair.FairState.joined``, ``relay.core.fair.complete``). It lives in ``tests/`` and imports the
product, never the other way round, so nothing the product ships can load it.
"""

from __future__ import annotations

import json
import secrets
import sys
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CHEATS = ("honest", "drop", "replace", "reroll", "unasked", "withhold")


def _cheat_transcript(cheat: str) -> None:
    from relay.core import fairness

    honest: Callable[..., dict[str, Any]] = fairness.transcript

    def cheating(**fields: Any) -> dict[str, Any]:
        if fields.get("pending") is not None:
            given = ((str(pid), bytes(value)) for pid, value in fields["witnesses"])
            witnesses = sorted(given, key=lambda w: w[0].encode())
            if cheat == "drop" and witnesses:
                witnesses = witnesses[1:]
            elif cheat == "replace" and witnesses:
                witnesses[0] = (witnesses[0][0], secrets.token_bytes(16))
            elif cheat == "reroll":
                fields["nonce"] = secrets.token_bytes(len(fields["nonce"] or b"") or 32)
            fields["witnesses"] = witnesses
        return honest(**fields)

    fairness.transcript = cheating  # the cheat itself


def _cheat_unasked() -> None:
    from relay.core import fair
    from relay.core.actions import Session

    honest = fair.FairState.joined
    left_out: weakref.WeakKeyDictionary[fair.FairState, str] = weakref.WeakKeyDictionary()

    def joined(self: fair.FairState, session: Session, witness: bool) -> None:
        if witness and session.role == "player" and left_out.setdefault(self, session.id) == session.id:
            return  # never counted as a witness, so never asked
        honest(self, session, witness)

    fair.FairState.joined = joined  # type: ignore[method-assign]  # the cheat itself


def _cheat_withhold() -> None:
    from relay.core import fair
    from relay.core.actions import Action

    def complete(*args: Any, **kwargs: Any) -> list[Action]:
        return []  # the roll stays open and is never made

    fair.complete = complete


def install(cheat: str) -> None:
    """Patch ``cheat`` into this process's relay (before the server starts)."""
    if cheat not in CHEATS:
        raise ValueError(f"unknown cheat {cheat!r}; one of {', '.join(CHEATS)}")
    if cheat in ("drop", "replace", "reroll"):
        _cheat_transcript(cheat)
    elif cheat == "unasked":
        _cheat_unasked()
    elif cheat == "withhold":
        _cheat_withhold()


def command(cheat: str, folder: Path) -> str:
    """An executable in ``folder`` that runs ``tablerelay`` with ``cheat`` (for ``running_relay(command=)``,
    which also runs ``room create`` with it)."""
    path = folder / f"tablerelay-cheat-{cheat}"
    path.write_text(
        f"#!/bin/sh\ncd {json.dumps(str(ROOT))} && exec {json.dumps(sys.executable)} "
        f'-m tests.fairness.cheating_relay {cheat} "$@"\n',
        encoding="utf-8",
    )
    path.chmod(0o755)
    return str(path)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in CHEATS:
        usage = f"usage: python -m tests.fairness.cheating_relay {{{','.join(CHEATS)}}} TABLERELAY-ARGS..."
        print(usage, file=sys.stderr)
        return 2
    install(args[0])
    if args[1:2] == ["serve"]:
        print(json.dumps({"event": "cheating_relay", "cheat": args[0]}), file=sys.stderr, flush=True)
    from relay.ops import cli

    return cli.main(args[1:])


if __name__ == "__main__":
    sys.exit(main())
