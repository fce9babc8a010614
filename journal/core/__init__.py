"""The journal's domain, without I/O: the model (`model`), the one fold that decides every
action (`fold`), the offset runs an index keeps per journal (`index`), and readers waiting
for an offset (`waiters`).

Imports nothing of the other rooms (codec, kafka, store, client); only `journal.errors` and
`journal.metrics` beside itself.
"""
