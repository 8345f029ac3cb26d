"""README.md cannot go stale: its benchmark tables are what benchmarks/readme_tables.py generates from
benchmarks/results/*.json, and every command line it (and docs/*.md) shows names a subcommand, flags, make target
or script that exists.

Commands come from fenced code blocks (continuations joined, ``$`` prompts honoured, comments, pipes, ``&&`` and
redirections handled, quoted commands such as ``sbatch --wrap "..."`` checked too) and from inline code spans
(``epsilon|delta`` alternatives expanded). ``mcacct`` / ``python -m mcacct`` lines are checked against
``build_parser()``; ``make`` targets against the Makefile; ``python X.py`` scripts for existence and, when they use
argparse, their flags (read from the source with ``ast``, nothing is run).
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib.util
import itertools
import os
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP_LANGUAGES = {"python", "py", "json", "toml", "yaml", "yml"}
PASSTHROUGH = {"launch/job_array.py": "sample"}  # flags after `--` go to this mcacct subcommand
PREFIXES = {"do", "then", "else", "time", "exec", "nohup", "env", "sudo"}  # words before a command
SCHEDULERS = {"srun", "sbatch", "mpirun", "mpiexec"}  # their command follows their own options
OPERATORS = set("|&;")
REDIRECTS = set("<>")


def _load_tables():
    spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "benchmarks" / "readme_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_tables_match_the_results():
    """`python benchmarks/readme_tables.py --check`, in-process."""
    diff = _load_tables().diff()
    assert diff == "", "README.md is stale; run `make readme` (python benchmarks/readme_tables.py):\n" + diff


def test_every_generated_region_has_markers_and_rejects_bad_ones():
    tables = _load_tables()
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for name in tables.REGIONS:
        assert f"<!-- tables:{name}:begin -->" in text and f"<!-- tables:{name}:end -->" in text, name
    with pytest.raises(ValueError, match="no matching end"):
        tables.render(text.replace("<!-- tables:gpu:end -->", ""))
    with pytest.raises(ValueError, match="unknown region"):
        tables.render(text + "\n<!-- tables:nope:begin -->\n<!-- tables:nope:end -->\n")


# ------------------------------------------------------------------------------------------- command extraction

def snippets(path: Path) -> list[tuple[int, str, bool]]:
    """(line number, text, is_inline) of every fenced shell line and every inline code span of a Markdown file."""
    lines = path.read_text(encoding="utf-8").split("\n")
    out: list[tuple[int, str, bool]] = []
    prose = list(lines)
    i = 0
    while i < len(lines):
        m = re.match(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)", lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(1), m.group(2).lower(), i
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        body = lines[start + 1:j]
        for k in range(start, min(j + 1, len(lines))):
            prose[k] = ""
        i = j + 1
        if lang in SKIP_LANGUAGES:
            continue
        prompted = any(b.lstrip().startswith("$ ") for b in body)
        k = 0
        while k < len(body):
            first, line = k, body[k]
            while line.rstrip().endswith("\\") and k + 1 < len(body):
                k += 1
                line = line.rstrip()[:-1] + " " + body[k].strip()
            k += 1
            stripped = line.strip()
            if prompted:
                if not stripped.startswith("$ "):
                    continue
                stripped = stripped[2:]
            out.append((start + 2 + first, stripped, False))
    text = "\n".join(prose)
    for m in re.finditer(r"(?<!`)`([^`]+)`(?!`)", text):
        out.append((text.count("\n", 0, m.start()) + 1, " ".join(m.group(1).split()), True))
    return out


def alternatives(span: str, limit: int = 16) -> list[str]:
    """`mcacct pld epsilon|delta` -> both commands (inline spans write alternatives with a bare `|`)."""
    m = re.search(r"[\w.-]+(?:\|[\w.-]+)+", span)
    if not m:
        return [span]
    out = []
    for choice in m.group(0).split("|"):
        out += alternatives(span[:m.start()] + choice + span[m.end():], limit)
    return out[:limit]


def tokenize(line: str) -> list[str]:
    """Shell words, with operators (|, &&, ;) and redirections as their own tokens; comments dropped."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def segments(tokens: list[str]) -> list[list[str]]:
    """Simple commands of a token list: split at |, &&, ;, redirections (and their targets) removed."""
    out: list[list[str]] = [[]]
    skip = False
    for t in tokens:
        if skip:
            skip = False
            continue
        if t and set(t) <= OPERATORS:
            out.append([])
        elif t and set(t) <= REDIRECTS | {"&"}:
            skip = True
        else:
            out[-1].append(t)
    return [s for s in out if s]


def commands(line: str) -> list[list[str]]:
    """Every launcher invocation (mcacct, python, make) of a shell line, quoted ones included."""
    try:
        tokens = tokenize(line)
    except ValueError:  # unbalanced quotes: prose in a code block, not a command
        return []
    found: list[list[str]] = []
    for seg in segments(tokens):
        words = list(seg)
        while words and (re.match(r"^[A-Za-z_]\w*=", words[0]) or words[0] in PREFIXES):
            words = words[1:]
        if words and words[0] in SCHEDULERS:  # srun [options] COMMAND ...
            words = next((words[n:] for n, w in enumerate(words) if _launcher(w)), [])
        if words and _launcher(words[0]):
            found.append(words)
        for w in seg:
            if " " in w:
                found += commands(w)
    return found


def _launcher(word: str) -> bool:
    name = os.path.basename(word)
    return name in ("mcacct", "make") or re.fullmatch(r"python(3(\.\d+)?)?", name) is not None


# ----------------------------------------------------------------------------------------------- the checkers

@functools.lru_cache(maxsize=1)
def mcacct_parser() -> argparse.ArgumentParser:
    from mcacct.cli.commands import build_parser
    return build_parser()


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _flag(token: str) -> str | None:
    """The option a token names (`--a=b` -> `--a`, `[--x` -> `--x`), or None for values and placeholders."""
    t = token.strip("[]()")
    if not t.startswith("-") or t in ("-", "--") or re.match(r"^-\.?\d", t):
        return None
    return t.split("=", 1)[0]


def _check_flags(tokens: list[str], options: set[str], where: str) -> list[str]:
    errors = []
    for t in tokens:
        if t == "--":
            break
        flag = _flag(t)
        if flag is not None and flag not in options:
            errors.append(f"{where}: unknown flag {flag}")
    return errors


def check_mcacct(args: list[str]) -> list[str]:
    """Subcommand (and sub-subcommand) exist, every flag is an option of that parser."""
    parser = mcacct_parser()
    words = [a for a in args if a not in ("...", "…")]
    while words and words[0].startswith("-"):
        if _flag(words[0]) not in parser._option_string_actions:
            return [f"mcacct: unknown global option {words[0]}"]
        words = words[1:]
    if not words:
        return []
    subs = _subparsers(parser)
    for position in (0, 1):  # `mcacct pld delta/epsilon`: alternatives of a (sub)subcommand, each checked
        if len(words) > position and not words[position].startswith("-") and re.fullmatch(
                r"[\w-]+([/|][\w-]+)+", words[position]):
            return [e for alt in re.split("[/|]", words[position])
                    for e in check_mcacct(words[:position] + [alt] + words[position + 1:])]
    if words[0] not in subs:
        return [f"mcacct: unknown subcommand {words[0]!r} (known: {', '.join(subs)})"]
    name, sub, rest = words[0], subs[words[0]], words[1:]
    nested = _subparsers(sub)
    if nested and rest and not rest[0].startswith("-"):
        if rest[0] not in nested:
            return [f"mcacct {name}: unknown subcommand {rest[0]!r} (known: {', '.join(nested)})"]
        name, sub, rest = f"{name} {rest[0]}", nested[rest[0]], rest[1:]
    return _check_flags(rest, set(sub._option_string_actions), f"mcacct {name}")


@functools.lru_cache(maxsize=None)
def script_options(path: Path) -> frozenset[str]:
    """The option strings of a script's argparse `add_argument` calls, read from its source."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    opts = {a.value for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"
            for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")}
    return frozenset(opts | {"-h", "--help"}) if opts else frozenset()


ABSL_BUILTIN = {"--help", "--helpshort", "--helpfull", "--helpxml", "--flagfile", "--undefok", "-h"}


def _absl_defines(path: Path) -> tuple[set[str], set[str]]:
    """(names, boolean names) of the `flags.DEFINE_*("name", ...)` calls of a file."""
    names, bools = set(), set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr.startswith("DEFINE_") and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            names.add(node.args[0].value)
            if node.func.attr in ("DEFINE_bool", "DEFINE_boolean"):
                bools.add(node.args[0].value)
    return names, bools


@functools.lru_cache(maxsize=None)
def absl_options(path: Path) -> frozenset[str]:
    """The absl flags of a launcher: its own DEFINE_* calls, plus launch/_flags.py's (the scheme flags from the
    table of mcacct/cli/schemes.py) when it calls them; `--noNAME` for booleans."""
    names, bools = _absl_defines(path)
    if not names:
        return frozenset()
    if "_flags.define_" in path.read_text(encoding="utf-8"):
        shared, shared_bools = _absl_defines(path.parent / "_flags.py")
        from mcacct.cli import schemes
        names |= shared | {f.option.lstrip("-") for f in schemes.all_flags()}
        bools |= shared_bools | {f.option.lstrip("-") for f in schemes.all_flags() if f.kind is bool}
    return frozenset({f"--{n}" for n in names} | {f"--no{n}" for n in bools} | ABSL_BUILTIN)


def check_python(args: list[str]) -> list[str]:
    """`python -m mcacct ...` as mcacct; `python X.py ...`: X.py exists, argparse flags exist."""
    if len(args) >= 2 and args[0] == "-m":
        return check_mcacct(args[2:]) if args[1] == "mcacct" else []
    if not args or not args[0].endswith(".py"):
        return []
    script = args[0]
    path = ROOT / script
    if not path.is_file():
        return [f"python {script}: no such script"]
    errors = []
    options = script_options(path) or absl_options(path)
    if options:
        errors += _check_flags(args[1:], set(options), f"python {script}")
    if "--" in args:
        rest = args[args.index("--") + 1:]
        if script in PASSTHROUGH:
            errors += check_mcacct([PASSTHROUGH[script]] + rest)
        elif script == "launch/local_multiprocess.py":  # an mcacct command line with --mcacct, else the host's
            errors += check_mcacct(rest) if "--mcacct" in args[:args.index("--")] else check_python(
                ["launch/accelerator_host.py"] + rest)
    return errors


@functools.lru_cache(maxsize=1)
def make_targets() -> frozenset[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return frozenset(m.group(1) for m in re.finditer(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, re.M))


def check_make(args: list[str]) -> list[str]:
    return [f"make {a}: no such target in the Makefile" for a in args
            if not a.startswith("-") and "=" not in a and a not in make_targets()]


def check(words: list[str]) -> list[str]:
    name = os.path.basename(words[0])
    if name == "mcacct":
        return check_mcacct(words[1:])
    if name == "make":
        return check_make(words[1:])
    return check_python(words[1:])


def documented_commands() -> list[tuple[str, list[str]]]:
    """(file:line, argv) of every command shown in README.md and docs/*.md."""
    out = []
    for path in DOCUMENTS:
        for lineno, text, inline in snippets(path):
            for variant in (alternatives(text) if inline else [text]):
                for words in commands(variant):
                    out.append((f"{path.relative_to(ROOT)}:{lineno}", words))
    return out


# ------------------------------------------------------------------------------------------------------ tests

def test_documented_commands_exist():
    found = documented_commands()
    kinds = {k: sum(os.path.basename(w[0]) == k for _, w in found) for k in ("mcacct", "make")}
    assert kinds["mcacct"] >= 20 and kinds["make"] >= 3, kinds  # the extractor still finds the commands
    assert any(w[1:2] == ["benchmarks/throughput.py"] for _, w in found)
    errors = [f"{where}: {' '.join(words)}\n    {e}" for where, words in found for e in check(words)]
    assert not errors, "stale commands in the docs:\n" + "\n".join(errors)


def test_the_checker_catches_stale_commands():
    assert check(["mcacct", "calibrate", "--epsilon", "2", "--no-such-flag"])
    assert check(["mcacct", "no-such-command"])
    assert check(["mcacct", "pld", "nope"])
    assert check(["python", "-m", "mcacct", "delta", "--sigmaa", "1"])
    assert check(["make", "no-such-target"])
    assert check(["python", "benchmarks/no_such_script.py"])
    assert check(["python", "benchmarks/throughput.py", "--no-such-flag"])
    assert check(["python", "launch/job_array.py", "--out", "r", "--", "--no-such-flag"])
    assert check(["python", "launch/accelerator_host.py", "--sigma", "1", "--min_sep", "8"])  # deprecated spelling
    assert check(["python", "launch/local_multiprocess.py", "--", "--sigma", "1", "--nope"])
    assert not check(["python", "launch/accelerator_host.py", "--min-sep", "8", "--noquiet", "--cold-start"])
    assert not check(["mcacct", "pld", "epsilon", "--events", "e.json", "--delta", "1e-6", "--json"])
    assert not check(["mcacct", "--version"])
    assert not check(["mcacct", "pld", "delta/epsilon/calibrate"])
    assert check(["mcacct", "pld", "delta/nope"])


def test_extraction_handles_shell_syntax():
    line = 'A=1 mcacct merge runs/s1 --out m --json && mcacct plot m --out d.png | tee x > log  # a --comment'
    assert commands(line) == [["mcacct", "merge", "runs/s1", "--out", "m", "--json"],
                              ["mcacct", "plot", "m", "--out", "d.png"]]
    wrapped = 'sbatch --array=0-7 --wrap "mcacct sample --plan runs/cal --shard \\$ID --quiet"'
    assert commands(wrapped) == [["mcacct", "sample", "--plan", "runs/cal", "--shard", "$ID", "--quiet"]]
    assert commands("srun -n 1 python launch/accelerator_host.py --sigma 1")[0][:2] == [
        "python", "launch/accelerator_host.py"]
    assert sorted(alternatives("mcacct pld epsilon|delta --events F")) == [
        "mcacct pld delta --events F", "mcacct pld epsilon --events F"]
    assert list(itertools.chain.from_iterable(commands("import jax, mcacct"))) == []


def _layout_mentions(layout: str) -> set[str]:
    """The module paths (``mcacct/...py``) that the README's layout names: a line's first word is a folder
    (``kernels/``) or a module of the folder above it, and every ``NAME.py`` on the line, or on the continuation lines
    below it, belongs to that folder."""
    out: set[str] = set()
    stack: list[str] = []
    folder = ""
    for line in layout.splitlines():
        word = line.strip().split(" ")[0] if line.strip() else ""
        indent = len(line) - len(line.lstrip(" "))
        if word and indent <= 12:                        # a folder or a module line (continuations sit deeper)
            depth = indent // 2
            if word.endswith("/"):
                stack = stack[:depth] + [word.rstrip("/")]
                folder = "/".join(stack)
            else:
                stack = stack[:depth]
                folder = "/".join(stack)
        for name in re.findall(r"(?<![\w./])(\w+\.py)\b", line):
            out.add(f"{folder}/{name}")
    return out


def test_the_layout_names_every_module():
    """The README's layout (the fenced block that starts with ``mcacct/``) names every module of the package in its
    folder, so a newcomer finds each one from the folder names (the package markers ``__init__.py`` and
    ``__main__.py`` aside)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("```\nmcacct/\n") + 4
    layout = text[start:text.index("```", start)]
    modules = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "mcacct").rglob("*.py")
                     if p.name not in ("__init__.py", "__main__.py"))
    named = _layout_mentions(layout)
    missing = [m for m in modules if m not in named]
    assert not missing, f"README.md's layout does not name {missing}"
