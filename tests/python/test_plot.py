"""python -m gpuacct plot: the per-step wall chart."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpuacct.__main__ import main
from conftest import clean_env, check


def _pixels(path: Path):
    """(width, height, pixel array) of a PNG, via PIL or matplotlib."""
    try:
        from PIL import Image
        import numpy as np
        img = np.asarray(Image.open(path).convert("RGB"), dtype=float)
    except ImportError:
        import matplotlib.image as mpimg
        img = mpimg.imread(str(path))[..., :3] * 255.0
    return img.shape[1], img.shape[0], img


def test_plot_cli_writes_png(report_file: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "walls.png"
    res = subprocess.run([sys.executable, "-m", "gpuacct", "plot", str(report_file), "-o",
                          str(out), "--width", "8", "--height", "4", "--dpi", "50"],
                         env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, timeout=120)
    check(res)
    assert out.is_file()
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    w, h, img = _pixels(out)
    assert (w, h) == (400, 200)
    assert img.std() > 10.0, "image looks blank"
    # The data wall's orange (#E67E22) is drawn.
    orange = ((abs(img[..., 0] - 0xE6) < 8) & (abs(img[..., 1] - 0x7E) < 8)
              & (abs(img[..., 2] - 0x22) < 8))
    assert orange.sum() > 200


def test_plot_title_has_verdict(report_file: Path) -> None:
    pytest.importorskip("matplotlib")
    from gpuacct.plot import plot_walls
    fig = plot_walls(str(report_file), width=6, height=3, dpi=50)
    title = fig.axes[0].get_title()
    assert "data-bound" in title
    import matplotlib.pyplot as plt
    plt.close(fig)


def test_plot_stream(stream_file: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "s.png"
    assert main(["plot", str(stream_file), "-o", str(out)]) == 0
    w, h, img = _pixels(out)
    assert (w, h) == (1000, 500)
    assert img.std() > 10.0


def test_plot_without_matplotlib(report_file: Path, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    rc = main(["plot", str(report_file), "-o", str(tmp_path / "x.png")])
    assert rc == 3
    err = capsys.readouterr().err
    assert "needs matplotlib" in err and "pip install matplotlib" in err
    assert not (tmp_path / "x.png").exists()
