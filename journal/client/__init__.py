"""The direct client: `Journals` (`journals`), the facade a process opens to append, read,
delete, list and subscribe, and the parts it assembles: conditional appends (`conditional`),
listing ids (`listing`), snapshots (`snapshots`); `Deferred`, what a worker waits on while
`Journals` connects.

May import every other room of `journal/`; nothing in them imports it. Its satellites get the
few collaborators they use from `Journals`, never `Journals` itself.
"""
