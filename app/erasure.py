"""`kafka-journal erase` and `kafka-journal keys new-kek|rotate`: crypto-shredding from the
command line (docs/erasure.md).

`erase` prints the journal's key state and the steps, asks (or `--yes`; `--dry-run` changes
nothing) and erases; an erasure that stopped part way (state `erasing`) is finished by running
it again. `keys rotate` rewraps every data key of the topic with the current key-encryption key
(`KJ_KEK_FILE`), unwrapping with the previous one (`KJ_KEK_OLD_FILE`): events are untouched.
Exit codes as app/confirm.py's; 2 without a key-encryption key.
"""

from __future__ import annotations

import asyncio

from app.confirm import (
    CANNOT_ASK_EXIT,
    UNAVAILABLE_EXIT,
    NotConfirmed,
    confirm,
    failed,
)
from journal import Journals, Settings
from journal.errors import SetupMissing, Unavailable

_STEPS = "mark it erasing (no more reads or appends), purge its rows, destroy its data key"


def run_erase(settings: Settings, journal_id: str, dry_run: bool, yes: bool) -> int:
    async def erase() -> int:
        async with await Journals.connect(settings) as journals:
            journal = journals.journal(journal_id)
            state = await journal.erasure_state()
            print(f"journal {journal_id}: data key {'none' if state is None else state.value}")
            if state is not None and state.value == "erased":
                print(f"journal {journal_id}: erased already; nothing to do")
                return 0
            print(f"journal {journal_id}: the erasure will {_STEPS}; it cannot be undone")
            if dry_run:
                return 0
            await asyncio.to_thread(confirm, f"erase journal {journal_id} for good?", yes)
            erasure = await journal.erase()
            where = "" if erasure.position is None else f" (Purge at {erasure.position.offset})"
            print(f"journal {journal_id}: erased{where}")
            return 0

    try:
        return asyncio.run(erase())
    except NotConfirmed as declined:
        return failed("erase", str(declined), declined.exit_code)
    except SetupMissing as error:
        return failed("erase", str(error), CANNOT_ASK_EXIT)
    except Unavailable as error:
        return failed("erase", f"{error}; run it again to finish the erasure", UNAVAILABLE_EXIT)


def run_rotate(settings: Settings, dry_run: bool, yes: bool) -> int:
    async def rotate() -> int:
        async with await Journals.connect(settings) as journals:
            if journals.encryption is None:
                raise SetupMissing("keys rotate needs KJ_KEK_FILE (the new key-encryption key)")
            keys = journals.encryption.keys
            print(f"topic {settings.topic}: the data keys get wrapped by the KEK {keys.kek.id}")
            if dry_run:
                return 0
            await asyncio.to_thread(confirm, "rewrap every data key of the topic?", yes)
            rewrapped, current = await keys.rotate(settings.topic)
            print(f"rewrapped {rewrapped} data keys; {current} were wrapped by it already")
            return 0

    try:
        return asyncio.run(rotate())
    except NotConfirmed as declined:
        return failed("keys rotate", str(declined), declined.exit_code)
    except SetupMissing as error:
        return failed("keys rotate", str(error), CANNOT_ASK_EXIT)
    except Unavailable as error:
        return failed("keys rotate", f"{error}; run it again", UNAVAILABLE_EXIT)
