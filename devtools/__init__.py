"""Development tools shared by the tests and the benchmarks; nothing in the service uses them.

`devtools.workers` starts real worker processes (`kafka-journal worker`) with given settings;
`devtools.browser` launches Debian's headless Chromium through Playwright.
They live here rather than under `app/` so that the production packages hold only what a
deployment runs; `bench` (the `kafka-journal bench` command) and `tests` import it.
"""
