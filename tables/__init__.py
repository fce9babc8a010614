"""The worker's changelog-backed tables: per journal, its Append offsets and its Delete and
Purge offsets."""
