"""Functions a screen long and files a concept wide: no function in plugins/ over LINES lines or of
complexity over COMPLEXITY, and no file over FILE_LINES lines.

Measured here with :mod:`ast`, so the check needs nothing installed: a function's length is its
lines from ``def`` to its last statement (docstring included); its cyclomatic complexity is
McCabe's, counted the way radon counts it: 1, plus one for each ``if``, ``elif``, conditional
expression, ``for``, ``while``, ``except``, ``assert``, ``case``, comprehension and comprehension
condition, and one for each ``and`` / ``or`` beyond the first operand. A function nested in
another, and each method, is measured on its own and not counted in the one around it.

Run as a script to list the functions over either limit:
``python tests/unit/test_house.py [paths...]`` (default: plugins/).
"""

from __future__ import annotations

import ast
import os
import sys

PLUGINS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "plugins")
LINES = 60
COMPLEXITY = 15
#: A file holds one concept; one that grows past this is several (cut it along its banner comments).
FILE_LINES = 600

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_SCOPES = _FUNCTIONS + (ast.ClassDef,)


def _children(node):
    """The nodes under ``node`` that belong to it, not to a function or class nested in it."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, _SCOPES):
            continue
        yield child
        yield from _children(child)


def complexity(func):
    """McCabe's cyclomatic complexity of one function, its nested functions left out."""
    score = 1
    for node in _children(func):
        if isinstance(node, (ast.If, ast.IfExp, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler, ast.Assert)):
            score += 1
        elif isinstance(node, ast.comprehension):
            score += 1 + len(node.ifs)
        elif isinstance(node, ast.BoolOp):
            score += len(node.values) - 1
        elif getattr(ast, "match_case", None) is not None and isinstance(node, ast.match_case):
            score += 1
    return score


def functions(tree):
    """``(qualified name, node)`` of every function and method in a module, nested ones too."""
    found = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((prefix + child.name, child))
                visit(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def measure(source, path="<source>"):
    """``[(name, lines, complexity, first line)]`` for every function of ``source``."""
    tree = ast.parse(source, path)
    return [(name, node.end_lineno - node.lineno + 1, complexity(node), node.lineno)
            for name, node in functions(tree)]


def offenders(paths, lines=LINES, limit=COMPLEXITY):
    """``[(path, line, name, lines, complexity)]`` of the functions over either limit."""
    found = []
    for top in paths:
        walk = [(top, [], [os.path.basename(top)])] if top.endswith(".py") else os.walk(top)
        for folder, _dirs, files in walk:
            for f in sorted(files):
                if not f.endswith(".py"):
                    continue
                path = folder if folder.endswith(".py") else os.path.join(folder, f)
                with open(path, encoding="utf-8") as handle:
                    for name, length, score, lineno in measure(handle.read(), path):
                        if length > lines or score > limit:
                            found.append((os.path.relpath(path), lineno, name, length, score))
    return sorted(found)


def test_the_measure_counts_what_radon_counts():
    source = (
        "def f(a, b):\n"
        "    '''doc'''\n"
        "    if a and b or a:\n"            # if +1, and +1, or +1
        "        return [x for x in a if x]\n"  # comprehension +1, its if +1
        "    elif b:\n"                     # elif +1
        "        pass\n"
        "    for x in a:\n"                 # for +1
        "        try:\n"
        "            assert x\n"            # assert +1
        "        except ValueError:\n"      # except +1
        "            continue\n"
        "    def g():\n"                    # nested: measured apart
        "        return 1 if a else 2\n"    # ifexp +1 (in g)
        "    return g\n"
    )
    assert measure(source) == [("f", 14, 10, 1), ("f.g", 2, 2, 12)]  # radon cc: f - B (10)


def test_a_long_or_tangled_function_is_found(tmp_path):
    long_one = "def long():\n" + "    x = 1\n" * LINES
    tangled = "def tangled(a):\n" + "".join("    if a == %d:\n        return %d\n" % (i, i) for i in range(COMPLEXITY))
    fine = "class C:\n    def fine(self):\n        return 1\n"
    path = tmp_path / "m.py"
    path.write_text(long_one + tangled + fine)
    assert [(o[2], o[3], o[4]) for o in offenders([str(path)])] == [
        ("long", LINES + 1, 1), ("tangled", 2 * COMPLEXITY + 1, COMPLEXITY + 1)]


def test_no_function_in_plugins_is_over_a_screen_or_too_tangled():
    found = offenders([PLUGINS])
    assert found == [], "\n".join("%s:%d %s: %d lines, complexity %d" % o for o in found)


def long_files(top, limit=FILE_LINES):
    """``[(path, lines)]`` of the Python files under ``top`` longer than ``limit`` lines."""
    found = []
    for folder, _dirs, files in os.walk(top):
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                with open(path, encoding="utf-8") as handle:
                    count = len(handle.read().splitlines())
                if count > limit:
                    found.append((os.path.relpath(path, top), count))
    return sorted(found)


def test_a_long_file_is_found(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "long.py").write_text("x = 1\n" * (FILE_LINES + 1))
    (tmp_path / "a" / "fine.py").write_text("x = 1\n" * FILE_LINES)
    (tmp_path / "notes.txt").write_text("x\n" * (FILE_LINES + 1))
    assert long_files(str(tmp_path)) == [(os.path.join("a", "long.py"), FILE_LINES + 1)]


def test_no_file_in_plugins_is_over_a_concept_wide():
    assert long_files(PLUGINS) == []


if __name__ == "__main__":
    for entry in offenders(sys.argv[1:] or [PLUGINS]):
        print("%s:%d %s: %d lines, complexity %d" % entry)
