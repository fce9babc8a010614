"""Finding a grow's cut in the log (docs/growing.md): the first Seal of an old partition at
or after an offset. Keys only: no record is decoded."""

from __future__ import annotations

from aiokafka import TopicPartition

from journal.core.grow import SEAL_ID
from journal.kafka.consumers import start_consumer, stop_consumer
from journal.kafka.driver_errors import KafkaError, core_error
from kjconfig.access import KafkaAccess

_SEAL_KEY = SEAL_ID.encode("utf-8")


async def first_seal(
    kafka: KafkaAccess, topic: str, partition: int, start: int, timeout_s: float = 30.0
) -> int | None:
    """The offset of the first Seal in `topic`/`partition` at or after `start`, reading up to
    the partition's end as of now (a bounded read); None if there is none."""
    tp = TopicPartition(topic, partition)
    consumer = await start_consumer(kafka, fetch_max_wait_ms=20)
    try:
        end = (await consumer.end_offsets([tp]))[tp]
        if end <= start:
            return None
        consumer.assign([tp])
        consumer.seek(tp, start)
        while (await consumer.position(tp)) < end:
            batches = await consumer.getmany(tp, timeout_ms=int(timeout_s * 1000))
            if not batches:
                raise TimeoutError(f"{topic}-{partition}: no records within {timeout_s}s")
            for message in batches[tp]:
                if message.offset >= end:
                    return None
                if message.key == _SEAL_KEY:
                    offset: int = message.offset
                    return offset
        return None
    except KafkaError as error:
        raise core_error(error, f"{topic}-{partition}: cannot read the log for its Seal") from error
    finally:
        await stop_consumer(consumer)
