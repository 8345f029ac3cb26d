"""The scheme registry (:mod:`mcacct.schemes.registry`): one list of metadata, look-ups, and run-time
registration -- a scheme registered with ``register(...)`` and nothing else works with the Python API, the job
files and calibration, and is simply not offered by the command line or ``mcacct compare``.

The command-line table is tested in tests/cli/test_scheme_flags.py, the job-file form in
tests/jobs/test_problem_file.py, the compare rows in tests/report/test_compare_rows.py and the schemes' PLD
hooks in tests/evr/test_scheme_pld_hooks.py."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

import jax
import pytest

import mcacct
from mcacct.engine.problem import Problem
from mcacct.schemes import registry
from mcacct.schemes.bminsep import BMinSep
from mcacct.strategies.banded import BandedToeplitz

#: The built-in schemes (a specification: dropping one from the registry must fail here).
BUILT_IN = {"BMinSep", "TruncatedBMinSep", "MultiAttribution", "CyclicPoisson", "BallsInBins", "BandedInverse"}


def built_in() -> tuple[registry.SchemeInfo, ...]:
    """The registered schemes defined in the package (tests may register others for a while)."""
    return tuple(e for e in registry.schemes() if e.cls.__module__.startswith("mcacct."))


def test_registry_lists_every_scheme_once():
    infos = registry.schemes()
    assert registry.names() == tuple(e.name for e in infos) and registry.names()[0] == "bminsep"
    classes = [e.cls for e in infos]
    assert {e.cls.__name__ for e in built_in()} == BUILT_IN and len(set(classes)) == len(classes)
    assert registry.classes() == {e.name: e.cls for e in infos}
    spellings = [n for e in infos for n in {e.name, e.label}]  # a name or label names one scheme only
    assert len(set(spellings)) == len(spellings)
    for e in infos:
        assert dataclasses.is_dataclass(e.cls) and e.cls.__dataclass_params__.frozen
        assert registry.get(e.name) is e and registry.get(e.label) is e and registry.entry_for(e.cls) is e
        assert getattr(mcacct, e.cls.__name__) is e.cls  # public API
        assert e.summary and e.label
    assert [e.name for e in built_in() if e.compare_default] == ["bminsep", "cyclic-poisson", "balls-in-bins"]
    assert registry.get("bminsep").label == "b-min-sep" and registry.get("cyclic-poisson").label == "cyclic-poisson"
    with pytest.raises(ValueError, match="scheme must be one of"):
        registry.get("shuffling")
    assert registry.entry_for(object()) is None


def test_entry_for_finds_the_nearest_registered_class():
    @dataclass(frozen=True)
    class Sub(BMinSep):
        pass

    assert registry.entry_for(Sub(0.2, 4, 32)) is registry.get("bminsep")
    assert registry.entry_for(Sub) is registry.get("bminsep")


def test_the_registry_module_imports_no_consumer():
    """Only scheme classes: nothing from the engine, the jobs, EVR, reports or the command line."""
    import ast
    import pathlib
    tree = ast.parse(pathlib.Path(registry.__file__).read_text())
    mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    mods |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert all(not m.startswith("mcacct") or m == "mcacct.schemes" or m.startswith(("mcacct.schemes.", "mcacct.core."))
               for m in mods), mods


@pytest.fixture
def scratch_registry(monkeypatch):
    """The registry as it is, restored after the test (registrations of the test are dropped)."""
    monkeypatch.setattr(registry, "_SCHEMES", list(registry.schemes()))


@dataclass(frozen=True)
class RenamedBMinSep(BMinSep):
    """b-min-sep under another class: a scheme registered at run time, with no command-line or compare entry."""


def test_register_refuses_duplicates_and_non_schemes(scratch_registry):
    before = registry.schemes()
    bm = registry.get("bminsep")
    for info, needle in [
        (registry.SchemeInfo("bminsep", RenamedBMinSep), "scheme name 'bminsep' is already registered"),
        (registry.SchemeInfo("other", RenamedBMinSep, label="b-min-sep"), "'b-min-sep' is already registered"),
        (registry.SchemeInfo("b-min-sep", RenamedBMinSep), "'b-min-sep' is already registered"),
        (registry.SchemeInfo("other", BMinSep), "class BMinSep is already registered as scheme 'bminsep'"),
    ]:
        with pytest.raises(ValueError, match=needle):
            registry.register(info)

    # an incomplete scheme is refused at registration, naming every member it lacks (Scheme's hooks included)
    @dataclass(frozen=True)
    class Bare(mcacct.Scheme):
        iterations: int

        def check_strategy(self, strategy):
            pass
    missing = registry.missing_members(Bare)
    assert set(missing) == {"sensitivity_bound", "output_coordinate_bound", "participation_boundaries", "draw_law_tv",
                            "loss_error_params", "summary", "draw", "loss_rows"}
    with pytest.raises(ValueError, match="Bare does not implement the scheme contract .*: missing "
                                         + ", ".join(missing) + "$"):
        registry.register(registry.SchemeInfo("bare", Bare))
    assert registry.missing_members(BMinSep) == []
    with pytest.raises(ValueError, match="register takes a SchemeInfo"):
        registry.register(bm.cls)

    @dataclass
    class Mutable:
        iterations: int = 1
    with pytest.raises(ValueError, match="frozen"):
        registry.SchemeInfo("mutable", Mutable)
    with pytest.raises(ValueError, match="dataclass"):
        registry.SchemeInfo("plain", object)
    with pytest.raises(ValueError, match="non-empty"):
        registry.SchemeInfo("", RenamedBMinSep)
    assert registry.schemes() == before  # nothing was added by a refusal
    # unregister removes by name (or label) and refuses an unknown name
    info = registry.register(registry.SchemeInfo("renamed-bminsep", RenamedBMinSep, label="renamed"))
    assert registry.unregister("renamed") is info and registry.schemes() == before
    with pytest.raises(ValueError, match="scheme must be one of"):
        registry.unregister("renamed-bminsep")


def test_a_scheme_registered_at_run_time_works_without_cli_or_compare_entries(scratch_registry, tmp_path, capsys):
    from mcacct.cli import schemes as cli_schemes
    from mcacct.cli.commands import main
    from mcacct.evr.calibrate import calibrate, plan_calibration
    from mcacct.jobs import calibration as cj
    from mcacct.jobs import shards
    from mcacct.jobs.problem_file import scheme_from_dict, scheme_to_dict
    from mcacct.report import compare

    info = registry.register(registry.SchemeInfo("renamed-bminsep", RenamedBMinSep, "b-min-sep, renamed"))
    assert registry.names()[-1] == "renamed-bminsep" and registry.get("renamed-bminsep") is info
    assert registry.entry_for(RenamedBMinSep) is info and registry.classes()["renamed-bminsep"] is RenamedBMinSep
    strategy = BandedToeplitz((1.0, 0.5))
    scheme = RenamedBMinSep(0.2, 2, 8)
    problem = Problem(scheme, strategy)

    # Python API: the same numbers as b-min-sep (the class only differs by name)
    key = jax.random.key(3)
    est = mcacct.estimate(problem, 1.0, key, 256, (0.5,), chunk_size=64)
    ref = mcacct.estimate(Problem(BMinSep(0.2, 2, 8), strategy), 1.0, key, 256, (0.5,), chunk_size=64)
    assert est.delta(0)["delta_estimate"] == ref.delta(0)["delta_estimate"]

    # job files: the scheme round-trips by registry name and fields; shards run and merge
    d = scheme_to_dict(scheme)
    assert d == {"type": "renamed-bminsep", **dataclasses.asdict(scheme)}
    assert type(scheme_from_dict(json.loads(json.dumps(d)))) is RenamedBMinSep
    cfg = shards.JobConfig(problem, 1.0, (0.5,), 256, 64, seed=3)
    for i in (0, 1):
        shards.run_shard(cfg, i, 2, str(tmp_path / "stats"))
    merged = shards.merge([str(tmp_path / "stats")])
    assert merged.complete and merged.config == cfg and type(merged.config.problem.scheme) is RenamedBMinSep

    # calibration, in process and as a plan written and read back
    res = calibrate(problem, 1.0, 0.1, jax.random.key(0), num_samples=400, chunk_size=128, sigmas=[0.8, 1.2, 2.0])
    assert res.overall_delta <= 0.1
    plan = plan_calibration(problem, 1.0, 0.1, jax.random.key(0), num_samples=400, chunk_size=128,
                            sigmas=[0.8, 1.2, 2.0])
    cj.write_plan(str(tmp_path / "plan"), plan, problem)
    _, back, _ = cj.load_plan(str(tmp_path / "plan"))
    assert back == problem and type(back.scheme) is RenamedBMinSep

    # the command line and mcacct compare do not offer it
    assert "renamed-bminsep" not in cli_schemes.cli_names() and "renamed-bminsep" not in compare.row_names()
    with pytest.raises(SystemExit) as exc:
        main(["delta", "--sigma", "1", "--epsilon", "1", "--scheme", "renamed-bminsep"])
    assert exc.value.code == 2 and "invalid choice" in capsys.readouterr().err
    with pytest.raises(ValueError, match="registered without a command line"):
        cli_schemes.scheme_args(type("Args", (), {"scheme": "renamed-bminsep"})())
    with pytest.raises(ValueError, match="schemes must be a non-empty list"):
        compare.compare_schemes(1.0, 0.05, 8, 2, 2, 16, schemes="renamed-bminsep")



def test_a_scheme_with_facets_is_offered_by_the_command_line_compare_and_interop(scratch_registry, monkeypatch):
    """One entry carries everything: a run-time scheme whose SchemeInfo has a command line, a compare row and a
    jax-privacy mapping is offered by all three, with nothing added anywhere else; an entry with a wrong facet is
    refused, naming it."""
    from mcacct.cli import schemes as cli_schemes
    from mcacct.cli.commands import build_parser
    from mcacct.interop import jax_privacy as jp
    from mcacct.report import compare
    from mcacct.schemes.entry import CompareRow, ComparePlan, JaxPrivacyEntry
    from mcacct.schemes.flags import Flag, SchemeCLI

    def build(a):
        return RenamedBMinSep(a.min_sep_prob(a.min_sep), a.min_sep, a.iterations, a.warm_start), a.strategy()

    cli = SchemeCLI(build, flags=(Flag("--renamed-knob", int, "renamed: a knob"),))
    row = CompareRow(lambda s: ComparePlan(RenamedBMinSep(s.sampling_prob, s.min_sep, s.iterations), s.strategy))
    mapping = JaxPrivacyEntry("RenamedSampling", ("iterations",), lambda sel, m: None,
                              lambda scheme, bs: ("renamed", scheme.iterations))
    registry.register(registry.SchemeInfo("renamed-bminsep", RenamedBMinSep, "renamed", label="renamed",
                                          cli=cli, compare=row, jax_privacy=mapping))
    assert cli_schemes.cli_names()[-1] == "renamed-bminsep" and cli_schemes.flag_for("renamed_knob") is not None
    args = build_parser().parse_args(["delta", "--sigma", "1", "--epsilon", "1", "--scheme", "renamed-bminsep",
                                      "--sampling-prob", "0.2", "--min-sep", "2", "--iterations", "8",
                                      "--c-col", "1"])
    assert cli_schemes.scheme_from_args(args) == (RenamedBMinSep(0.2, 2, 8), BandedToeplitz((1.0,)))
    with pytest.raises(ValueError, match="--renamed-knob does not apply to --scheme bminsep"):
        cli_schemes.scheme_args(build_parser().parse_args(["delta", "--sigma", "1", "--epsilon", "1",
                                                           "--renamed-knob", "3"]))
    assert compare.row_names()[-1] == "renamed" and compare.parse_schemes("renamed")[0].cls is RenamedBMinSep
    assert jp.supported_batch_selections()[-1] == "RenamedSampling"
    # to_jax_privacy reads the mapping (jax-privacy itself is not needed for it)
    monkeypatch.setattr(jp, "_jax_privacy_batch_selection", lambda: None)
    assert jp.to_jax_privacy(RenamedBMinSep(0.2, 2, 8)) == ("renamed", 8)
    with pytest.raises(ValueError, match="got MultiAttribution"):
        jp.to_jax_privacy(mcacct.MultiAttribution(0.2, 2, 8, 2))
    with pytest.raises(ValueError, match="SchemeInfo.cli must be a SchemeCLI"):
        registry.SchemeInfo("x", RenamedBMinSep, cli=row)
    with pytest.raises(ValueError, match="compare_default needs a compare row"):
        registry.SchemeInfo("x", RenamedBMinSep, compare_default=True)
