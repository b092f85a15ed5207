"""The examples harness on small pages of its own: parsing, refusing, matching output.

How steps run, in the environment pages get, is tests/docs/test_example_runner.py.
"""

from __future__ import annotations

import textwrap

import pytest

from tests.docs.example_blocks import Step, code_blocks, page_examples
from tests.docs.shown_output import first_missing_line

FENCE = "```"


def _page(text: str) -> str:
    """A page written with ''' for the fence, so the tests' own source stays readable."""
    return textwrap.dedent(text).lstrip("\n").replace("'''", FENCE)


def _steps(text: str) -> list[Step]:
    examples = page_examples(_page(text), "page.md")
    assert examples.refusals == []
    return examples.steps


def test_console_commands_their_continuations_and_shown_output() -> None:
    steps = _steps(
        """
        Intro.

        '''console
        $ echo one
        one
        $ printf '%s\\n' two \\
            three
        two

        three
        $ true
        '''
        """
    )
    assert [step.where for step in steps] == ["page.md:4", "page.md:6", "page.md:11"]
    assert {step.kind for step in steps} == {"console"}
    assert steps[1].source == "printf '%s\\n' two \\\n    three"
    assert steps[1].shown == ("two", "", "three")
    assert steps[2].shown is None  # nothing shown: only the exit code counts


def test_fences_with_tildes_longer_fences_and_in_lists() -> None:
    text = _page(
        """
        - a step:

          '''console
          $ echo indented
          '''
        ~~~python
        print("tilde")
        ~~~
        ````text
        '''python
        not a block of its own
        '''
        ````
        """
    )
    blocks = code_blocks(text)
    assert [(block.line, block.info) for block in blocks] == [
        (3, "console"),
        (6, "python"),
        (9, "text"),
    ]
    assert blocks[0].body == ("$ echo indented",)
    assert blocks[2].body[0] == FENCE + "python"


def test_the_info_strings_first_word_decides_and_data_blocks_are_not_run() -> None:
    examples = page_examples(
        _page(
            """
            '''Console title="Try it"
            $ echo hi
            '''
            '''json
            {"a": 1}
            '''
            '''text
            $ not run
            '''
            '''sql
            SELECT 1
            '''
            """
        ),
        "page.md",
    )
    assert [step.source for step in examples.steps] == ["echo hi"]
    assert examples.refusals == []


@pytest.mark.parametrize("info", ["sh", "bash", "shell", "shell-session", "pycon", ""])
def test_shell_like_and_bare_fences_are_refused(info: str) -> None:
    examples = page_examples(_page(f"# Title\n\n'''{info}\nls\n'''\n"), "docs/page.md")
    (refusal,) = examples.refusals
    assert refusal.startswith("docs/page.md:3: ")
    for advice in ("```console", "```python", "```text"):
        assert advice in refusal
    assert examples.steps == []


def test_a_skip_marker_skips_its_example_with_the_reason() -> None:
    examples = page_examples(
        _page(
            """
            <!-- example: skip needs a real replica set -->
            '''console
            $ false
            '''
            <!--example:skip  Spark is not installed here  -->
            '''python
            raise SystemExit(1)
            '''
            '''text
            # output
            never checked
            '''
            """
        ),
        "page.md",
    )
    assert examples.steps == []
    assert examples.skipped == [
        ("page.md:2", "needs a real replica set"),
        ("page.md:6", "Spark is not installed here"),
    ]
    assert examples.refusals == []


@pytest.mark.parametrize(
    ("marker", "block", "complaint"),
    [
        ("<!-- example: skip -->", "console\n$ false", "no reason"),
        ("<!-- example: skip    -->", "python\nraise SystemExit(1)", "no reason"),
        ("<!-- example: skip too slow -->", "text\nplain", "not an example"),
        ("<!-- example: sikp too slow -->", "console\n$ true", "example: skip REASON"),
    ],
)
def test_bad_skip_markers_are_refused(marker: str, block: str, complaint: str) -> None:
    examples = page_examples(_page(f"{marker}\n'''{block}\n'''\n"), "page.md")
    (refusal,) = examples.refusals
    assert refusal.startswith("page.md:2: ")
    assert complaint in refusal
    assert examples.skipped == []


@pytest.mark.parametrize(
    "text",
    [
        "'''console\nls\n'''\n",  # no `$ ` at all
        "'''console\nls\n$ true\n'''\n",  # output before any command
        "'''text\n# output\nhello\n'''\n",  # output of no python block
        "'''console\n$ true\n",  # never closed
    ],
)
def test_malformed_examples_are_refused(text: str) -> None:
    assert len(page_examples(_page(text), "page.md").refusals) == 1


def test_a_python_blocks_output_block_is_its_shown_output() -> None:
    (step,) = _steps(
        """
        '''python
        print("hello")
        '''

        '''text
        # output
        hello
        '''
        """
    )
    assert (step.where, step.kind, step.shown) == ("page.md:1", "python", ("hello",))
    assert step.source == 'print("hello")\n'


@pytest.mark.parametrize(
    ("shown", "missing"),
    [
        (["a", "c"], None),  # in order, with a line between
        (["  b  "], None),  # surrounding whitespace does not count
        (["a", "", "...", "d"], None),  # blank lines and `...` lines match anything
        (["x = ...;", "... end"], None),  # `...` inside a line matches any text
        (["x = ...; y"], "x = ...; y"),
        (["c", "a"], "a"),  # out of order
        (["b", "e"], "e"),
        (["x = 1"], "x = 1"),  # a line must match whole, not in part
    ],
)
def test_shown_lines_match_the_output_in_order(shown: list[str], missing: str | None) -> None:
    actual = "a\n  b\nc\n\nx = 1; y = 2;\nthe end\nd\n"
    assert first_missing_line(shown, actual) == missing
