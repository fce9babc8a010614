"""The worker's changelog-backed tables: head caches and deletion watermarks, per journal."""
