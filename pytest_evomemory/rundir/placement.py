"""Where a run goes: the one decision, made here for every entry point.

A session asks :class:`Placement` (built from its options, the directory it was
started in, and whether the user picked tasks by hand) for:

* :meth:`Placement.run_dirs`: one run directory per arm;
* :meth:`Placement.arms_dir`: the directory holding a session's arms (its
  arms.json, compare.html, compare.json; a repeated run's replicates.json).

The rules, in order:

* A single run goes to the output directory option (or the resumed directory),
  the run config's ``output_dir``, or ``evomemory-results/<name>``.
* With several arms the output directory option (or the resumed directory) is the
  directory that holds them, each in ``<dir>/<name>``, beside the comparison;
  without it an arm goes to its config's ``output_dir`` or
  ``evomemory-results/<name>``.
* A replicate's run directory is ``r<i>`` inside the directory its arm would have had.
* A side run of hand-picked tasks (node ids, ``-k``) goes inside that directory
  (``side-run/``), so it never moves the full run to ``history/``; a directory the
  user named (output directory, resume) is used as named.
* A resumed session's arms manifest must agree with this placement: nothing read
  from it is used as a path (:func:`check_manifest_dirs`).

Every directory a session writes is then checked (:func:`.paths.check_output_dir`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..config import RunConfig, base_configs
from ..core.errors import ConfigError
from ..options import Flags, SessionOptions
from .arms import ArmsManifest, inside
from .layout import DEFAULT_OUTPUT_ROOT, SIDE_RUN, RunDirError
from .paths import check_output_dir, check_run_name
from .resume import RESUME, ResumeSource


def default_run_dir(name: str, root: Path) -> Path:
    return root / DEFAULT_OUTPUT_ROOT / check_run_name(name)


@dataclass(frozen=True)
class Placement:
    """Where a session's runs go, from what the driver was told.

    ``hand_picked``: the user picked tasks by hand (a side run); ``writes``: this
    process writes the run directories (they are then checked, not only resolved)."""

    options: SessionOptions
    flags: Flags
    #: relative paths on the command line are relative to this directory
    here: Path
    hand_picked: bool = False
    writes: bool = True

    def side(self, run_dir: Path) -> Path:
        """Where the session writes what it would write to ``run_dir`` (a side run:
        ``side-run/`` inside it)."""
        if not self.hand_picked or self.options.output_dir or self.options.resume:
            return run_dir
        return run_dir / SIDE_RUN

    def single_run_dir(self, run_config: RunConfig) -> Path:
        """Where the run of a session's only run config goes."""
        output = self.options.resume or self.options.output_dir or run_config.output_dir
        return self.side((self.here / output) if output else default_run_dir(run_config.name, self.here))

    def arms_dir(self, run_configs: Sequence[RunConfig], replicated: bool = False) -> Path:
        """The directory holding a session's arms (where a resumed session's were):
        for one repeated run config, the directory its run would have had."""
        bases = base_configs(run_configs)
        if replicated and len(bases) == 1:
            return self.single_run_dir(bases[0]).resolve()
        where = self.options.resume or self.options.output_dir or DEFAULT_OUTPUT_ROOT
        return self.side((self.here / where).resolve())

    def run_dirs(self, run_configs: Sequence[RunConfig], resume: ResumeSource | None) -> list[Path]:
        """One run directory per arm (see the module's rules); refused, before anything
        is written, when a resumed manifest places an arm elsewhere or two arms share one."""
        here = self.here
        option = self.options.output_dir
        if len(base_configs(run_configs)) == 1:
            run_dirs = [self.single_run_dir(run_config) for run_config in run_configs]
        else:
            parent = self.side(here / (option or self.options.resume or DEFAULT_OUTPUT_ROOT))
            run_dirs = [
                self.side(here / run_config.output_dir) if run_config.output_dir and not option
                and not self.options.resume else parent / run_config.name
                for run_config in run_configs
            ]
        run_dirs = [
            run_dir if run_config.replicate is None else run_dir / run_config.replicate.tag
            for run_config, run_dir in zip(run_configs, run_dirs, strict=True)
        ]
        if len(run_configs) > 1:
            if resume is not None and resume.manifest is not None:
                self._check_resumed(resume, run_configs, run_dirs)
            resolved = [run_dir.resolve() for run_dir in run_dirs]
            for index, run_dir in enumerate(resolved):
                if run_dir in resolved[:index]:
                    raise ConfigError(
                        f"arms {run_configs[resolved.index(run_dir)].label!r} and {run_configs[index].label!r} would "
                        f"both write to {run_dir}; remove `output_dir` from their run configs or give each its own"
                    )
        if not self.writes:
            return [run_dir.resolve() for run_dir in run_dirs]
        return [check_output_dir(run_dir) for run_dir in run_dirs]

    def _check_resumed(self, resume: ResumeSource, run_configs: Sequence[RunConfig], run_dirs: Sequence[Path]) -> None:
        """A resumed session's arms manifest names the directories this placement gives."""
        assert resume.manifest is not None
        flag = self.flags("resume")
        check_manifest_dirs(resume, run_configs, self.here)
        for run_config, run_dir in zip(run_configs, run_dirs, strict=True):
            recorded = arm_dir_recorded(resume.manifest, run_config.label, resume.directory)
            if recorded is not None and recorded != run_dir.resolve():
                raise RunDirError(
                    f"{flag} {resume.directory}: its arms.json puts arm {run_config.label!r} in "
                    f"{recorded}, but this session would write it to {run_dir.resolve()}; resume that arm on its "
                    f"own ({flag}={recorded})"
                )


def arm_dir_recorded(manifest: ArmsManifest, name: str, directory: Path) -> Path | None:
    """Where the manifest says arm ``name`` lived, resolved, or None if it names none."""
    for entry in manifest.entries:
        if entry.name == name:
            if inside(directory, entry.run_dir):
                return (directory / entry.run_dir).resolve()
            return Path(entry.run_dir).resolve() if Path(entry.run_dir).is_absolute() else None
    return None


def arm_dir_allowed(run_dir: Path, directory: Path, own_output_dir: Path | None) -> bool:
    """Whether a manifest's arm directory is one the session's own inputs name: inside
    the manifest's ``directory``, or the arm's run config's ``output_dir``."""
    resolved = run_dir.resolve()
    base = directory.resolve()
    return (base in resolved.parents) or (own_output_dir is not None and resolved == own_output_dir.resolve())


def check_manifest_dirs(resume: ResumeSource, run_configs: Sequence[RunConfig], here: Path) -> None:
    """Each arm directory the arms manifest names must be one the session's own inputs
    name: inside the manifest's directory, or the arm's config's ``output_dir``."""
    if resume.manifest is None:
        return
    directory = resume.directory
    for entry, run_config in zip(resume.manifest.entries, run_configs, strict=False):
        recorded = Path(entry.run_dir)
        run_dir = recorded if recorded.is_absolute() else directory / recorded
        own = here / run_config.output_dir if run_config.output_dir else None
        if not arm_dir_allowed(run_dir, directory, own):
            raise RunDirError(
                f"{RESUME} {directory}: its arms.json names {run_dir} as arm {entry.name!r}'s directory, which is "
                "neither inside it nor that arm's output_dir (the manifest was edited or damaged); resume each "
                f"arm's directory on its own ({RESUME}=DIR/<arm>)",
                option="resume",
            )


__all__ = ["Placement", "arm_dir_allowed", "arm_dir_recorded", "check_manifest_dirs", "default_run_dir"]
