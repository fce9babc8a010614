"""Put this folder on PYTHONPATH and Python runs this at start-up: aiokafka in that process can
no longer decode zstd batches, as without the codec library. Tests of poison batches use it to
make one codec undecodable in a worker process, against the real broker."""

import aiokafka.codec

aiokafka.codec.has_zstd = lambda: False
