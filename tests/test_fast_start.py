"""Fast start (issue 35, item 4): `--help` answers before the statistics, matplotlib or a provider library
load; the figures' text widths and their one-layout rendering give what matplotlib gives the slow way."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from matplotlib import image as mpimg
from matplotlib.font_manager import FontProperties
from matplotlib.textpath import TextPath

from analysis.card import cli as card_cli
from analysis.load.synthetic import synthetic_results
from analysis.report import cli as report_cli
from analysis.report import plots
from analysis.report.build import compute_tables
from analysis.report.render import PNG_DPI, PNG_SAVE, rendered
from analysis.stats import corrected, null_ranges
from tests.support.studies import ROOT, cli_env

#: never needed to print a command's usage
HEAVY = ("matplotlib", "crowdkit", "nltk", "litellm", "torch", "pandas", "statsmodels", "sklearn", "ppi_py")


@pytest.mark.parametrize("command", ["analysis.report", "analysis.card"])
def test_help_imports_no_heavy_library(command: str, tmp_path: Path) -> None:
    """`python -m <command> --help` as a user runs it, then the modules it left loaded (sys.modules, not a
    timing): none of the heavy libraries, and the usage printed."""
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['{command}', '--help']\n"
        "try:\n"
        f"    runpy.run_module('{command}', run_name='__main__', alter_sys=True)\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print('LOADED', sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = _fresh_python(code, tmp_path)
    assert f"usage: python -m {command}" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "LOADED []", out.stdout + out.stderr


def _fresh_python(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`python -c code` in a fresh interpreter (what it imports is the point), from the checkout."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=ROOT,
        env=cli_env(tmp_path),
    )


#: loaded by the statistic that uses them, not with the report's or the card's modules: crowd-kit (and nltk) for a
#: GLAD fit (opt-in), ppi-python (and numba) for a corrected estimate, matplotlib for a figure; scikit-learn
#: by no table (the calibration's isotonic fit is scipy's)
ON_USE = ("crowdkit", "nltk", "ppi_py", "numba", "sklearn", "matplotlib")


def test_the_commands_modules_load_no_library_before_a_table_uses_it(tmp_path: Path) -> None:
    """Importing the report's and the card's code (every table declaration) leaves the libraries of single
    statistics unloaded (sys.modules, not a timing): a study without expert labels, or with fewer than three
    raters per mode, never pays for them."""
    code = (
        "import sys, analysis.report.build, analysis.card.build\n"
        f"print('LOADED', sorted(m for m in {ON_USE!r} if m in sys.modules))\n"
    )
    out = _fresh_python(code, tmp_path)
    assert out.stdout.strip().splitlines()[-1] == "LOADED []", out.stdout + out.stderr


def test_the_latent_and_calibration_tables_load_neither_crowdkit_nor_sklearn(tmp_path: Path) -> None:
    """Dawid–Skene, majority vote and MACE run on arrays, the isotonic calibration on scipy: a study with
    expert labels and three raters per mode gets its latent and calibration tables without crowd-kit (and
    nltk) or scikit-learn loaded (sys.modules, not a timing)."""
    code = (
        "import sys\n"
        "from analysis.load.synthetic import synthetic_humans, synthetic_results\n"
        "from analysis.report.build import compute_tables\n"
        "study = synthetic_results(n_instances=6, seed=4)\n"
        "tables = compute_tables(study, synthetic_humans(study, seed=5), n_boot=5)\n"
        "print('TABLES', sorted(k for k in tables if k in ('latent_competence', 'calibration')))\n"
        "print('LOADED', sorted(m for m in ('crowdkit', 'nltk', 'sklearn') if m in sys.modules))\n"
    )
    out = _fresh_python(code, tmp_path).stdout.strip().splitlines()
    assert out[-2:] == ["TABLES ['calibration', 'latent_competence']", "LOADED []"], out


def test_a_bad_option_is_one_line_before_the_statistics(tmp_path: Path) -> None:
    """A bad --n-boot is argparse's one line (exit 2) from the light parser, as before the split."""
    out = subprocess.run(
        [sys.executable, "-m", "analysis.report", str(tmp_path), "--n-boot", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=cli_env(tmp_path),
    )
    assert out.returncode == 2 and "--n-boot: must be a positive integer, not '0'" in out.stderr
    assert "Traceback" not in out.stderr


def test_the_light_parsers_name_what_the_statistics_define() -> None:
    """The constants the parsers spell out (to stay light) are the statistics' own."""
    assert report_cli.DESIGNS == (corrected.RANDOM,)
    assert f"(default {null_ranges.N_REPS})" in card_cli.parser().format_help().replace("\n", " ").replace(
        "  ", " "
    )


def _extent_width(text: str, size: float) -> float:
    """The slow reference: the outline's extent of every line, by matplotlib's TextPath (inches)."""
    paths = (TextPath((0, 0), line, size=size, prop=FontProperties()) for line in text.split("\n"))
    return max(p.get_extents().width for p in paths) / 72


@pytest.mark.parametrize(
    "text",
    [
        "qwen_a · narrow_gen",
        "diagnostic_framing\n(lower is better: a win is a lower score)",
        "κ_w with the experts",
        "Δwin significant (BH q < 0.05) *",
        "comp. − indep. (95% CI)",
        "AV To fi ffi  two  spaces",
        "$x^2$ mathtext",
        "W",
    ],
)
def test_text_width_is_the_textpath_extent(text: str) -> None:
    """Known value: the cached glyph extents give TextPath's own width (to rounding), at two sizes."""
    for size in (plots.FONT, 7.0):
        assert plots.text_width(text, size) == pytest.approx(_extent_width(text, size), rel=1e-12, abs=1e-12)
    assert plots.text_width("") == 0.0


def test_rendered_png_is_the_plain_savefig_png() -> None:
    """One layout for both formats: the PNG is byte for byte what `savefig` (layout engine on) writes, the
    PDF is a PDF, and the figure keeps its constrained layout engine afterwards."""
    study = synthetic_results(n_instances=12, shift=3.0, seed=4)
    tables = compute_tables(study, n_boot=20)
    fig, twin = plots.winrate_bars(tables["winrate"]), plots.winrate_bars(tables["winrate"])
    assert fig is not None and twin is not None
    engine = fig.get_layout_engine()
    png, pdf = rendered(fig)
    plain = io.BytesIO()
    twin.savefig(plain, format="png", dpi=PNG_DPI, pil_kwargs=PNG_SAVE)
    assert png == plain.getvalue()
    default = io.BytesIO()  # zlib's default level: other bytes, the same pixels
    twin.savefig(default, format="png", dpi=PNG_DPI)
    assert (mpimg.imread(io.BytesIO(png)) == mpimg.imread(io.BytesIO(default.getvalue()))).all()
    assert pdf.startswith(b"%PDF") and fig.get_layout_engine() is engine
