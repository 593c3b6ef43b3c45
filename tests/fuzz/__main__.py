"""Run one fuzz target under atheris (libFuzzer):

    python -m tests.fuzz TARGET [libFuzzer flags] [CORPUS_DIR ...]

TARGET is ``frames``, ``foundry``, ``imports`` or ``roll20``. Flags are libFuzzer's, e.g.
``-max_total_time=600``, ``-runs=100000``, ``-timeout=10`` (seconds per input before it counts as a hang),
``-rss_limit_mb=2048``.
The first corpus folder receives the new inputs libFuzzer finds; pass a scratch folder first and the seed
corpus ``tests/fuzz/corpus/TARGET`` second to keep the seeds as they are. A crash writes ``crash-…`` (or
``timeout-…``, ``oom-…``) under ``-artifact_prefix`` and exits non-zero; replay one input with
``python -m tests.fuzz TARGET path/to/crash-file``.
"""

from __future__ import annotations

import sys

import atheris  # type: ignore[import-untyped]  # types-atheris is not among the test extras

NAMES = ("frames", "foundry", "imports", "roll20")


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] not in NAMES:
        print(
            f"usage: python -m tests.fuzz {{{','.join(NAMES)}}} [libFuzzer flags] [corpus dirs]",
            file=sys.stderr,
        )
        return 2
    # Only the project's own code is instrumented for coverage: the targets' paths through it are what
    # libFuzzer should steer towards, and instrumenting msgpack or the standard library only slows it.
    with atheris.instrument_imports(include=["relay", "rules"]):
        from tests.fuzz.targets import TARGETS
    atheris.Setup([argv[0], *argv[2:]], TARGETS[argv[1]])
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
