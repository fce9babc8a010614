"""A subscription group's members, each in a process of its own, for bench/subscription.py.

The member side (`python -m bench.group_member GROUP`, the journal's settings in `KJ_*`
variables) joins the group with `Journals.subscribe_group` and reports its partitions as
they change. On a line "go" on its stdin it consumes, acknowledging every batch, and reports
each batch: its receive time (`time.monotonic()`, CLOCK_MONOTONIC on Linux: one clock for
every process of the machine) and its records. At the end of its stdin it commits, leaves
the group and exits. Reports are JSON lines on stdout: `{"assigned": [partition, ...]}`,
`{"t": seconds, "records": [[partition, offset, events], ...]}`.

The parent side (`member_processes`) starts them, waits for the group to be stable, starts
them together, collects each record's first delivery, and stops them: killed on any error,
reaped always.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import orjson

from bench.environment import connected
from journal.settings import Settings
from journal.subscriptions import GroupEvent, GroupMember

REPO = Path(__file__).resolve().parents[1]
_GO = b"go\n"
_POLL_S = 0.02  # how often a waiting member looks at its assignment


def _emit(report: dict[str, object]) -> None:
    sys.stdout.buffer.write(orjson.dumps(report) + b"\n")
    sys.stdout.buffer.flush()


def _records(batch: list[GroupEvent]) -> list[list[int]]:
    """[partition, offset, events delivered of it] for each record of `batch`."""
    counts: dict[tuple[int, int], int] = {}
    for event in batch:
        where = (event.position.partition, event.position.offset)
        counts[where] = counts.get(where, 0) + 1
    return [[partition, offset, n] for (partition, offset), n in counts.items()]


class _Assignment:
    """Reports the member's partitions whenever they differ from the last reported."""

    def __init__(self, member: GroupMember) -> None:
        self._member = member
        self._last: list[int] | None = None

    def report(self) -> None:
        now = self._member.assignment()
        if now != self._last:
            self._last = now
            _emit({"assigned": now})


async def _member(group: str, heartbeat_s: float) -> None:
    loop = asyncio.get_running_loop()
    commands = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(commands), sys.stdin)
    settings = Settings.from_env()
    async with (
        connected(settings) as (journals, _),
        journals.subscribe_group(group, heartbeat_s=heartbeat_s) as member,
    ):
        assignment = _Assignment(member)
        go = asyncio.ensure_future(commands.readline())
        while not go.done():
            assignment.report()
            await asyncio.wait([go], timeout=_POLL_S)
        if go.result() != _GO:
            return  # the end of stdin: the parent gave up
        end = asyncio.ensure_future(commands.readline())
        # the loop's generator hooks close `batches()` after the break
        async for batch in member.batches():  # an empty one every heartbeat_s: `end` is seen
            if batch:
                received = time.monotonic()
                member.ack(*(event.position for event in batch))
                _emit({"t": received, "records": _records(batch)})
            assignment.report()
            if end.done():
                break


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.group_member", description=__doc__)
    parser.add_argument("group", help="the subscription group's name")
    parser.add_argument("--heartbeat-s", type=float, default=0.2)
    args = parser.parse_args(argv)
    asyncio.run(_member(args.group, args.heartbeat_s))
    return 0


# --- the parent's side ------------------------------------------------------------------------


def member_env(settings: Settings) -> dict[str, str]:
    """The environment of a member process: this one's, pointed at `settings`' topic."""
    return {
        **os.environ,
        "KJ_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "KJ_CASSANDRA_HOSTS": settings.cassandra_hosts,
        "KJ_CASSANDRA_PORT": str(settings.cassandra_port),
        "KJ_TOPIC": settings.topic,
        "KJ_KEYSPACE": settings.keyspace,
        "KJ_PARTITIONS": str(settings.partitions),
        "KJ_SECURITY": settings.security,
    }


class MemberProcesses:
    """Member processes of one group and what they reported: each record's first delivery
    (`first`: (partition, offset) -> (receive time, events)), what each member delivered
    (repeats included), each one's partitions."""

    def __init__(self, processes: list[asyncio.subprocess.Process], logs: list[Path]) -> None:
        self._processes = processes
        self._logs = logs
        self.first: dict[tuple[int, int], tuple[float, int]] = {}
        self.distinct = 0  # events of the records in `first`
        self.delivered = [0] * len(processes)
        self.assigned: list[list[int]] = [[] for _ in processes]
        self._changed = asyncio.Event()
        self._readers = [asyncio.create_task(self._read(i, p)) for i, p in enumerate(processes)]

    async def _read(self, index: int, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        async for line in process.stdout:
            report = orjson.loads(line)
            if "records" in report:
                received: float = report["t"]
                for partition, offset, events in report["records"]:
                    self.delivered[index] += events
                    where = (partition, offset)
                    seen = self.first.get(where)
                    if seen is None:
                        self.distinct += events
                    if seen is None or received < seen[0]:
                        self.first[where] = (received, events)
            elif "assigned" in report:
                self.assigned[index] = report["assigned"]
            self._changed.set()
        self._changed.set()  # its end: a waiter looks whether it was expected

    def _failed(self, index: int, why: str) -> RuntimeError:
        log = self._logs[index].read_text(errors="replace").splitlines()[-30:]
        return RuntimeError(f"group member {self._processes[index].pid} {why}:\n" + "\n".join(log))

    def _check_alive(self) -> None:
        for index, process in enumerate(self._processes):
            assert process.stdout is not None
            if process.returncode is not None or process.stdout.at_eof():
                raise self._failed(index, "ended early")

    async def until(self, condition: Callable[[], bool], timeout_s: float) -> None:
        """Until `condition` holds on what the members reported; RuntimeError if one ended,
        TimeoutError after `timeout_s`."""
        async with asyncio.timeout(timeout_s):
            while not condition():
                self._check_alive()
                self._changed.clear()
                await self._changed.wait()

    async def stable(self, partitions: int, timeout_s: float = 120) -> None:
        """Until every member has partitions and together they have each exactly once."""

        def stable() -> bool:
            owned = sorted(p for assigned in self.assigned for p in assigned)
            return all(self.assigned) and owned == list(range(partitions))

        await self.until(stable, timeout_s)

    async def go(self) -> float:
        """Start them consuming; the time they were told."""
        started = time.monotonic()
        for process in self._processes:
            assert process.stdin is not None
            process.stdin.write(_GO)
        await asyncio.gather(*(p.stdin.drain() for p in self._processes if p.stdin))
        return started

    async def stop(self, timeout_s: float = 60) -> None:
        """Tell them to stop (the end of their stdin) and wait until they have left."""
        for process in self._processes:
            assert process.stdin is not None
            process.stdin.close()
        async with asyncio.timeout(timeout_s):
            codes = await asyncio.gather(*(p.wait() for p in self._processes))
            await asyncio.gather(*self._readers)
        for index, code in enumerate(codes):
            if code:
                raise self._failed(index, f"exited with {code}")

    async def _kill(self) -> None:
        for process in self._processes:
            if process.returncode is None:
                process.kill()
        await asyncio.gather(*(p.wait() for p in self._processes))
        for reader in self._readers:
            reader.cancel()
        await asyncio.gather(*self._readers, return_exceptions=True)


@contextlib.asynccontextmanager
async def member_processes(
    settings: Settings, group: str, count: int, logs: Path
) -> AsyncIterator[MemberProcesses]:
    """`count` member processes of `group` on `settings`' topic, logging into `logs` (an
    existing directory); whatever happens, none outlives the block (stop them in it to let them
    leave the group and commit; the rest are killed)."""
    env = member_env(settings)
    processes: list[asyncio.subprocess.Process] = []
    paths = [logs / f"{group}-{i}.log" for i in range(count)]
    try:
        for path in paths:
            with path.open("ab") as log:
                processes.append(
                    await asyncio.create_subprocess_exec(
                        *[sys.executable, "-m", "bench.group_member", group],
                        cwd=REPO,
                        env=env,
                        stdin=asyncio.subprocess.PIPE,
                        stdout=asyncio.subprocess.PIPE,
                        stderr=log,
                        limit=1 << 24,  # a batch's report is one line
                    )
                )
        members = MemberProcesses(processes, paths)
    except BaseException:
        for process in processes:
            process.kill()
            await process.wait()
        raise
    try:
        yield members
    finally:
        await members._kill()


if __name__ == "__main__":
    sys.exit(main())
