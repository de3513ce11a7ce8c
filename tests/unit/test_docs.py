"""The documents' code runs, and shows what it prints.

Every fenced block of the documents in ``RUN`` is run on the simulator and its shown output checked:

* ``python`` blocks run in order, one interpreter per document (a later block sees an earlier one's names); a
  block with ``>>>`` prompts is a doctest (``...`` in an output line stands for any text), one without is run as
  a script;
* ``console`` blocks hold ``$ command`` lines, each followed by its output; each command runs in its own ``bash``,
  in a scratch folder that holds the repository's ``examples`` and ``benchmarks``, with the package's
  ``upsample3d-grad`` and this interpreter's ``python`` first on ``PATH``. It must exit 0 (a command that shows
  a failure shows ``; echo "exit $?"``). An output line ``...`` stands for any number of lines, ``...`` inside a
  line for any text;
* ``bash`` blocks: each line is a command that must exit 0; the output is not shown, so not checked.

A block that cannot run here carries ``<!-- not run: reason -->`` on the line before it; a block that needs an
optional module carries ``<!-- requires: module -->`` and is skipped, saying so, without it. Any other block
fails. The commands run as a user runs them on a machine without CANN: ``ACL_BINDINGS_BACKEND`` and the CANN
location variables are removed, so the backend is the simulator by the default ``auto``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ("README.md", "docs/api.md", "docs/fidelity.md")  # documents whose blocks are run
LINKED = ("README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")),
          "benchmarks/README.md", "CHANGELOG.md")  # documents whose relative links must resolve
README_MAX_LINES = 300
RUNNABLE = ("python", "console", "bash")
_FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)\s*$")
_MARK = re.compile(r"^\s*<!--\s*(not run|requires):\s*(.*?)\s*-->\s*$")
_CLEARED = ("ACL_BINDINGS_BACKEND", "ACL_BINDINGS_LIB_DIR", "ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME",
            "ASCEND_OPP_PATH", "ASCEND_CUSTOM_OPP_PATH", "UPSAMPLE3D_GRAD_DEVICE")
_DEFAULT_CANN_ROOTS = ("/usr/local/Ascend/cann", "/usr/local/Ascend/ascend-toolkit/latest")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a document."""

    doc: str
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    not_run: str | None  # the reason given by <!-- not run: ... -->
    requires: str | None  # the module named by <!-- requires: ... -->

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def parse_blocks(doc: str, text: str) -> list[Block]:
    """The fenced blocks of *text*, with the marks on the line before each (blank lines skipped)."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
        j = i + 1
        while j < len(lines) and not (lines[j].strip().startswith(fence) and lines[j].strip().strip(fence[0]) == ""):
            j += 1
        body = "\n".join(ln[len(indent):] if ln.startswith(indent) else ln.lstrip() for ln in lines[i + 1:j])
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        mark = _MARK.match(lines[k]) if k >= 0 else None
        not_run = mark.group(2) if mark and mark.group(1) == "not run" else None
        requires = mark.group(2) if mark and mark.group(1) == "requires" else None
        blocks.append(Block(doc, i + 1, lang, body + "\n", not_run, requires))
        i = j + 1
    return blocks


def _read(doc: str) -> str:
    return (ROOT / doc).read_text(encoding="utf-8")


BLOCKS = [b for doc in RUN for b in parse_blocks(doc, _read(doc))]
PYTHON = [b for b in BLOCKS if b.lang == "python" and b.not_run is None]
CONSOLE = [b for b in BLOCKS if b.lang in ("console", "bash") and b.not_run is None]


def output_matches(expected: str, actual: str) -> bool:
    """Whether *actual* is *expected*, where a line ``...`` is any lines and ``...`` in a line any text."""
    pattern = []
    for line in expected.rstrip("\n").splitlines():
        if line.strip() == "...":
            pattern.append(r"(?:[^\n]*\n)*?")
        else:
            pattern.append("[^\n]*".join(re.escape(part) for part in line.rstrip().split("...")) + r"\n")
    text = "".join(ln.rstrip() + "\n" for ln in actual.rstrip("\n").splitlines())
    return re.fullmatch("".join(pattern), text) is not None


def console_commands(block: Block) -> list[tuple[str, str]]:
    """``(command, shown output)`` pairs of a console block (a bash block: each line a command, no output)."""
    if block.lang == "bash":
        cmds = [ln for ln in block.text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        return [(c, "") for c in cmds]
    pairs: list[tuple[str, list[str]]] = []
    for ln in block.text.splitlines():
        if ln.startswith("$ "):
            pairs.append((ln[2:], []))
        elif pairs:
            pairs[-1][1].append(ln)
        elif ln.strip():
            raise AssertionError(f"{block.id}: output before the first '$ ' command: {ln!r}")
    return [(c, "\n".join(out)) for c, out in pairs]


# --------------------------------------------------------------------------- what needs nothing


def test_the_readme_is_a_front_door() -> None:
    """At most 300 lines, no commit hashes, no timings (they live in benchmarks/README.md)."""
    text = _read("README.md")
    n = len(text.splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines, more than {README_MAX_LINES}"
    hashes = re.findall(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b", text)
    assert not hashes, f"README.md names commits: {hashes}"
    timings = re.findall(r"\b\d+(?:\.\d+)? ?(?:ns|us|µs|ms)\b", text)
    assert not timings, f"README.md gives timings (they belong in benchmarks/README.md): {timings}"


def test_every_block_is_run_or_marked_not_run() -> None:
    bad = [f"{b.id}: a {b.lang or 'plain'} block" for b in BLOCKS if b.lang not in RUNNABLE and b.not_run is None]
    bad += [f"{b.id}: 'not run' without a reason" for b in BLOCKS if b.not_run == ""]
    bad += [f"{b.id}: 'requires' on a {b.lang} block" for b in BLOCKS if b.requires and b.lang != "python"]
    assert not bad, "blocks that the test cannot run and that are not marked <!-- not run: reason -->:\n" + \
        "\n".join(bad)


def test_the_readme_test_command_is_the_one_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    readme = [ln.split("#")[0].strip() for b in parse_blocks("README.md", _read("README.md"))
              for ln in b.text.splitlines()]
    readme = [ln[2:] if ln.startswith("$ ") else ln for ln in readme]
    for prefix in ("python -m pytest", "upsample3d-grad run"):
        ci_cmd = [ln.strip() for ln in ci if ln.strip().startswith(prefix)]
        assert len(ci_cmd) == 1, f".ci/run: expected one line starting {prefix!r}, got {ci_cmd}"
        assert ci_cmd[0] in readme, f"README.md does not show .ci/run's command {ci_cmd[0]!r}"


def test_ci_installs_with_the_readme_install_block_as_written() -> None:
    """.ci/run's first commands are the README's install block, line for line, and nothing before them touches
    the venv's pip: what CI passes with is what a user gets from that block."""
    install = next(b for b in parse_blocks("README.md", _read("README.md"))
                   if b.lang == "bash" and "python3 -m venv" in b.text)
    want = [ln.split("#")[0].strip() for ln in install.text.splitlines() if ln.split("#")[0].strip()]
    ci = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    cmds = [ln for ln in ci if ln and not ln.startswith("#") and not ln.startswith(("set ", "cd "))]
    assert cmds[:len(want)] == want, f".ci/run starts {cmds[:len(want)]}, the README's install block is {want}"
    assert not [ln for ln in cmds if re.search(r"pip install .*(-U|--upgrade)\b.*\bpip\b", ln)], \
        ".ci/run upgrades pip, which the README's install block does not"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*]|<[^>]+>|(?<!\w)_+|_+(?!\w)", "", heading.strip().lower())  # `torch_npu` keeps its _
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(doc: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    in_code = False
    for ln in doc.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(ln):
            in_code = not in_code
        elif not in_code and (m := re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", ln)):
            slug = _slug(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def _links(doc: Path) -> list[tuple[int, str]]:
    links: list[tuple[int, str]] = []
    in_code = False
    for no, ln in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        if _FENCE.match(ln):
            in_code = not in_code
            continue
        if in_code:
            continue
        ln = re.sub(r"`[^`]*`", "", ln)  # inline code is not a link
        links += [(no, t) for t in re.findall(r"\]\(([^)\s]+)\)", ln)]
    return links


def test_relative_links_resolve() -> None:
    bad = []
    for name in LINKED:
        doc = ROOT / name
        for no, target in _links(doc):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            if not dest.exists():
                bad.append(f"{name}:{no}: {target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                bad.append(f"{name}:{no}: {target}: no heading with the anchor #{anchor}")
    assert not bad, "\n".join(bad)


# --------------------------------------------------------------------------- running the blocks


@pytest.fixture(scope="session")
def doc_env(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path]:
    """The environment and scratch folder the documents' code runs in (see the module docstring)."""
    if os.environ.get("ACL_BINDINGS_BACKEND", "sim") != "sim":
        pytest.skip("the documents show the simulator: their code runs with --backend=sim")
    if any(Path(r).exists() for r in _DEFAULT_CANN_ROOTS):
        pytest.skip("the documents show a machine without CANN, and this one has a CANN install")
    from acl_bindings import _config, sim

    if not sim.is_built():
        if _config.require_sim():
            pytest.fail("ACL_BINDINGS_REQUIRE_SIM=1 and the simulator is not built")
        pytest.skip("the simulator is not built")
    bindir = tmp_path_factory.mktemp("bin")
    for name, line in (("upsample3d-grad", f'exec "{sys.executable}" -m upsample3d_grad "$@"'),
                       ("python", f'exec "{sys.executable}" "$@"')):
        (bindir / name).write_text(f"#!/bin/sh\n{line}\n")
        (bindir / name).chmod(0o755)
    work = tmp_path_factory.mktemp("docs")
    for name in ("examples", "benchmarks"):
        (work / name).symlink_to(ROOT / name)
    env = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p and "ascend" not in p.lower())
    env["PATH"] = os.pathsep.join((str(bindir), env.get("PATH", "")))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env, work


_RUNNER = textwrap.dedent("""
    import doctest, gc, importlib.util, io, json, sys, traceback
    blocks = json.load(sys.stdin)
    globs = {"__name__": "__docs__"}
    results = {}
    flags = doctest.ELLIPSIS
    for b in blocks:
        if b["requires"] and importlib.util.find_spec(b["requires"]) is None:
            results[b["id"]] = ["skipped", "needs " + b["requires"] + ", which is not installed"]
            continue
        try:
            if ">>> " in b["text"]:
                test = doctest.DocTestParser().get_doctest(b["text"], globs, b["id"], b["doc"], b["line"])
                out = io.StringIO()
                runner = doctest.DocTestRunner(optionflags=flags)
                runner.run(test, out=out.write, clear_globs=False)
                globs.update(test.globs)  # (a DocTest works on a copy)
                failed = runner.summarize(verbose=False).failed
                results[b["id"]] = ["failed", out.getvalue()] if failed else ["passed", ""]
            else:
                exec(compile(b["text"], b["id"], "exec"), globs)
                results[b["id"]] = ["passed", ""]
        except BaseException:
            results[b["id"]] = ["failed", traceback.format_exc()]
    from acl_bindings import loaded_backend
    from upsample3d_grad.functional import close_default_session
    close_default_session()
    globs.clear()
    gc.collect()
    backend = loaded_backend()
    live = {}
    if backend is not None and backend.is_simulator:
        from acl_bindings import sim
        live = {k: v for k, v in sim.live_handles().items() if v}
    with open(sys.argv[1], "w") as f:
        json.dump({"blocks": results, "live": live}, f)
""")

_python_runs: dict[str, Any] = {}


def _python_results(doc: str, doc_env: tuple[dict[str, str], Path]) -> Any:
    """Run every python block of *doc* in one interpreter (once per test session)."""
    if doc not in _python_runs:
        env, work = doc_env
        blocks = [dict(id=b.id, doc=b.doc, line=b.line, text=b.text, requires=b.requires)
                  for b in PYTHON if b.doc == doc]
        result_file = work / (doc.replace("/", "_") + ".json")
        proc = subprocess.run([sys.executable, "-c", _RUNNER, str(result_file)], input=json.dumps(blocks),
                              capture_output=True, text=True, env=env, cwd=work, timeout=600)
        if proc.returncode != 0 or not result_file.exists():
            pytest.fail(f"the python blocks of {doc} did not run (exit {proc.returncode}):\n"
                        f"{proc.stdout}\n{proc.stderr}")
        _python_runs[doc] = json.loads(result_file.read_text())
    return _python_runs[doc]


@pytest.mark.parametrize("block", PYTHON, ids=[b.id for b in PYTHON])
def test_python_block(block: Block, doc_env: tuple[dict[str, str], Path]) -> None:
    status, detail = _python_results(block.doc, doc_env)["blocks"][block.id]
    if status == "skipped":
        pytest.skip(detail)
    assert status == "passed", f"{block.id}:\n{detail}"


@pytest.mark.parametrize("doc", sorted({b.doc for b in PYTHON}))
def test_python_blocks_leave_no_live_handle(doc: str, doc_env: tuple[dict[str, str], Path]) -> None:
    live = _python_results(doc, doc_env)["live"]
    assert not live, f"{doc}'s python blocks leave live simulator handles: {live}"


@pytest.mark.parametrize("block", CONSOLE, ids=[b.id for b in CONSOLE])
def test_console_block(block: Block, doc_env: tuple[dict[str, str], Path]) -> None:
    env, work = doc_env
    bash = shutil.which("bash") or "/bin/bash"
    for command, shown in console_commands(block):
        proc = subprocess.run([bash, "-c", command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=env, cwd=work, timeout=300)
        assert proc.returncode == 0, \
            f"{block.id}: `{command}` exited {proc.returncode} (show it with `; echo \"exit $?\"`):\n{proc.stdout}"
        if block.lang == "console":
            assert output_matches(shown, proc.stdout), \
                f"{block.id}: `{command}` printed\n{proc.stdout}\nwhere the document shows\n{shown}"


# --------------------------------------------------------------------------- the checker itself


def test_the_matcher_and_the_parser() -> None:
    assert output_matches("a\n...\nd", "a\nb\nc\nd\n")
    assert output_matches("a\n...\nd", "a\nd")
    assert output_matches("x ... z", "x yyy z")
    assert not output_matches("a\nd", "a\nb\nd")
    assert not output_matches("x ... z", "x yyy z!")
    assert not output_matches("a", "a\nb")
    doc = "<!-- not run: why -->\n```bash\nls\n```\n\n<!-- requires: torch -->\n\n```python\n1\n```\n```\nplain\n```\n"
    a, b, c = parse_blocks("d.md", doc)
    assert (a.lang, a.not_run, a.line) == ("bash", "why", 2)
    assert (b.lang, b.requires, b.not_run) == ("python", "torch", None)
    assert (c.lang, c.not_run, c.text) == ("", None, "plain\n")
    assert _slug("Quick start: a fleet smoke and `compare`") == "quick-start-a-fleet-smoke-and-compare"


def test_the_fidelity_tables_name_tests_that_exist() -> None:
    """Each test a row of docs/fidelity.md names exists: ``file.py::name``, then ``::name`` for the last file
    named, and ``…::name`` for the file the text says ``…`` stands for."""
    text = _read("docs/fidelity.md")
    ellipsis = re.search(r"`((?:unit|sim)/[\w/]+\.py)`, written `…`", text)
    assert ellipsis, "docs/fidelity.md no longer says which file `…` stands for"
    aliases = dict(re.findall(r"`…::(\w+)\[case\]` stands for\s+`…::(\w+)\[case\]`", text))
    assert aliases, "docs/fidelity.md no longer says what `…::check[case]` stands for"
    bad, names = [], 0
    current: Path | None = None  # a bare ``::name`` belongs to the last file named, in this row or above
    for no, row in enumerate(text.splitlines(), 1):
        if not row.startswith("| ") or row.startswith("| rule") or row.startswith("| variable"):
            continue
        cell = row.rstrip(" |").split(" | ")[-1]
        for path, dots, name in re.findall(r"`(?:((?:unit|sim|npu|torch_npu)/[\w/]+\.py)|(…))?(?:::(\w+))?", cell):
            if dots:
                path = ellipsis.group(1)
            if path:
                current = ROOT / "tests" / path
                if not current.exists():
                    bad.append(f"docs/fidelity.md:{no}: {path}: no such test file")
                    current = None
            if name and current is not None:
                names += 1
                name = aliases.get(name, name)
                if not re.search(rf"^\s*def {name}\(", current.read_text(encoding="utf-8"), re.M):
                    bad.append(f"docs/fidelity.md:{no}: {current.relative_to(ROOT)}::{name}: no such test")
    assert names > 100, f"only {names} test names found in docs/fidelity.md: the parser is broken"
    assert not bad, "\n".join(bad)
