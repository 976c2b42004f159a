"""Checking a generator against the API and the clip spec, in the sandbox.

`validate_target` takes a module path, a .zip or a wheel; `validate_source` a `GeneratorSource`.
The report lists every problem found (missing function, wrong shape, wrong sample rate, NaN or
infinite samples, out of range, exceptions with the tail of their traceback, the time limit,
memory, network use, writes outside the scratch folder), not just the first.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from sandbox.errors import SandboxError
from sandbox.process import Limits, Sandbox, enforcement
from sandbox.source import GeneratorSource

from ..audio import ClipSpec
from .contract import CATEGORIES, check_output

# Problems after which the process is gone: nothing more can be checked.
FATAL = {
    "import",
    "missing_function",
    "load_model",
    "time_limit",
    "memory",
    "crash",
    "network",
    "write_outside",
    "not_visible",
    "process",
    "process_limit",
    "protocol",
    "archive",
    "isolation_unavailable",
}


@dataclass
class Problem:
    code: str
    message: str
    detail: str = ""


@dataclass
class ValidationReport:
    target: str
    spec: dict
    module: str = ""
    sample_rate: int | None = None
    has_text: bool = False
    problems: list[Problem] = field(default_factory=list)
    # Reported but not fatal: a GPU model may not be bit-exact from run to run.
    warnings: list[Problem] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    clips_checked: int = 0
    seconds: float = 0.0
    enforcement: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, code: str, message: str, detail: str = "") -> None:
        self.problems.append(Problem(code, message, detail.strip()))

    def summary(self) -> str:
        if self.ok:
            return (
                f"Valid generator: {self.clips_checked} clips checked across "
                f"{len(self.checks)} checks in {self.seconds:.1f} s."
            )
        return f"Invalid generator: {len(self.problems)} problem(s): " + "; ".join(
            p.message for p in self.problems
        )

    def to_dict(self) -> dict:
        data = asdict(self)
        data["ok"] = self.ok
        data["summary"] = self.summary()
        return data


def resolve_target(target: str, workdir: Path) -> GeneratorSource:
    """A module path, or a .zip / .whl file unpacked under `workdir`."""
    path = Path(target)
    if path.suffix.lower() in (".zip", ".whl") or path.is_file():
        if not path.is_file():
            raise SandboxError("archive", f"no such file: {target}")
        return GeneratorSource.from_archive(path, workdir / "code")
    return GeneratorSource.from_module(target)


def validate_target(
    target: str,
    spec: ClipSpec | None = None,
    *,
    limits: Limits | None = None,
    categories: tuple[str, ...] | list[str] = CATEGORIES,
    clips_per_category: int = 2,
    config: str | None = None,
    trusted: bool = False,
) -> ValidationReport:
    spec = spec or ClipSpec()
    with tempfile.TemporaryDirectory(prefix="foley-validate-") as tmp:
        try:
            source = resolve_target(target, Path(tmp))
        except SandboxError as exc:
            report = ValidationReport(target=target, spec=asdict(spec))
            report.add(exc.code, exc.message, exc.detail)
            return report
        if config:
            source.model_path = str(Path(config).resolve())
        return validate_source(
            source,
            spec,
            limits=limits,
            categories=categories,
            clips_per_category=clips_per_category,
            target=target,
            trusted=trusted,
        )


def validate_source(
    source: GeneratorSource,
    spec: ClipSpec | None = None,
    *,
    limits: Limits | None = None,
    categories: tuple[str, ...] | list[str] = CATEGORIES,
    clips_per_category: int = 2,
    target: str = "",
    seed: int = 1234,
    on_wait: Callable[[], None] | None = None,
    trusted: bool = False,
) -> ValidationReport:
    spec = spec or ClipSpec()
    limits = limits or Limits()
    report = ValidationReport(
        target=target or source.module, spec=asdict(spec), module=source.module
    )
    started = time.perf_counter()
    # `on_wait` is the job's heartbeat: loading may take longer than a job may stay silent.
    sandbox = Sandbox(source, spec, limits, on_wait=on_wait, trusted=trusted)
    report.enforcement = enforcement(sandbox.use_gpu, trusted)
    try:
        try:
            info = sandbox.start()
        except SandboxError as exc:
            report.add(exc.code, _describe(exc, "loading"), exc.detail)
            return report
        report.checks.append("imports and loads the model")
        report.has_text = bool(info.get("has_text"))
        rate = info.get("sample_rate")
        if not isinstance(rate, int | float) or int(rate) != rate:
            report.add("wrong_sample_rate", f"model.sample_rate is {rate}; expected an integer")
        else:
            report.sample_rate = int(rate)
            if rate != spec.sample_rate:
                report.add(
                    "wrong_sample_rate",
                    f"model.sample_rate is {int(rate):,} Hz; the challenge needs "
                    f"{spec.sample_rate:,} Hz",
                )
            else:
                report.checks.append("sample rate")
        first: np.ndarray | None = None
        failed: dict[tuple[str, str], list[str]] = {}
        for category in categories:
            try:
                array = sandbox.generate(category, clips_per_category, seed)
            except SandboxError as exc:
                if exc.code in FATAL:
                    report.add(exc.code, _describe(exc, f"generating {category}"), exc.detail)
                    return report
                message = (
                    f"generate raised {exc.message}" if exc.code == "exception" else exc.message
                )
                failed.setdefault((exc.code, message), []).append(category)
                if len(failed[(exc.code, message)]) == 1:
                    report.add(exc.code, f"{category}: {message}", exc.detail)
                continue
            problems = check_output(array, clips_per_category, spec, report.sample_rate)
            for code, message in problems:
                if (code, message) not in failed:
                    report.add(code, f"{category}: {message}")
                failed.setdefault((code, message), []).append(category)
            if not problems:
                report.clips_checked += clips_per_category
                if first is None:
                    first = array
                    if clips_per_category > 1 and np.array_equal(array[0], array[1]):
                        report.add(
                            "identical_clips",
                            f"{category}: the clips of one call are identical; each clip must "
                            "differ (derive them from the seed and the clip's index)",
                        )
                    again = sandbox.generate(category, clips_per_category, seed)
                    if not np.array_equal(array, again):
                        report.warnings.append(
                            Problem(
                                "not_deterministic",
                                f"{category}: the same seed gave different audio, so a resumed "
                                "job will not reproduce the clips it lost (seed every random "
                                "generator, including weight initialisation)",
                            )
                        )
                    else:
                        report.checks.append("the same seed gives the same audio")
        # Name every category a repeated problem affected.
        for problem in report.problems:
            for (code, message), cats in failed.items():
                if len(cats) > 1 and problem.code == code and problem.message.endswith(message):
                    problem.message = f"{', '.join(cats)}: {message}"
        if not failed:
            report.checks.append(f"{len(categories)} categories: shape, range, finite samples")
        if report.has_text and report.ok:
            try:
                array = sandbox.generate_from_text("a dog barks twice", 1, seed)
                for code, message in check_output(array, 1, spec):
                    report.add(code, f"generate_from_text: {message}")
                report.checks.append("generate_from_text")
            except SandboxError as exc:
                report.add(exc.code, _describe(exc, "generate_from_text"), exc.detail)
        if report.has_text and report.ok:
            # The prompts of several judges are asked for in one call: each must get the clips
            # it gets alone.
            try:
                both = sandbox.generate_from_texts(
                    ["rain on a roof", "a dog barks twice"], 1, [seed + 1, seed]
                )
                for code, message in check_output(both, 2, spec):
                    report.add(code, f"generate_from_texts: {message}")
                if report.ok and not np.array_equal(both[1:], array):
                    report.add(
                        "batch_differs",
                        "generate_from_texts: a prompt asked for with others gives other clips "
                        "than asked for alone",
                    )
                elif report.ok:
                    report.checks.append("prompts asked for together give their own clips")
            except SandboxError as exc:
                report.add(exc.code, _describe(exc, "generate_from_texts"), exc.detail)
        return report
    finally:
        sandbox.close()
        report.seconds = time.perf_counter() - started


def _describe(exc: SandboxError, doing: str) -> str:
    prefix = {
        "import": "the module cannot be imported",
        "load_model": "load_model failed",
        "exception": f"raised an exception {doing}",
    }.get(exc.code)
    return f"{prefix}: {exc.message}" if prefix else exc.message


def main(argv: list[str] | None = None) -> int:
    """`python -m stimuli.generators.validate TARGET`: the check, without the platform's settings.

    For authors testing a generator before they submit it.
    """
    import argparse
    import json

    parser = argparse.ArgumentParser(description="Check a generator against the generator API.")
    parser.add_argument("target", help="A module path, a .zip or a .whl.")
    parser.add_argument("--sample-rate", type=int, default=22_050)
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--clips", type=int, default=2)
    parser.add_argument("--config", help="A configuration file passed to load_model.")
    parser.add_argument(
        "--trusted",
        action="store_true",
        help="Run without isolation where this machine has none (your own code only).",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = validate_target(
        args.target,
        ClipSpec(sample_rate=args.sample_rate, duration_s=args.duration),
        clips_per_category=args.clips,
        config=args.config,
        trusted=args.trusted,
    )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        for problem in report.problems:
            print(f"ERROR  [{problem.code}] {problem.message}")
        for warning in report.warnings:
            print(f"WARN   [{warning.code}] {warning.message}")
        print(report.summary())
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
