import subprocess
import sys


def test_building_the_parser_imports_no_torch():
    # Every command pays for what the parser imports: keep heavy libraries in the commands.
    code = (
        "import sys; from crossalign.cli import build_parser; build_parser(); "
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_ls_lists_evaluations_with_their_metrics_directions(capsys):
    from crossalign.cli import main

    assert main(["ls", "evaluations"]) == 0
    lines = capsys.readouterr().out.splitlines()
    bli = lines.index(next(line for line in lines if line.startswith("bli ")))
    assert "precision_at_1-csls_knn_10 ↑ (percent)" in lines[bli + 1]
    assert "words (count)" in lines[bli + 1]
    aer = next(line for line in lines if line.split()[:1] == ["metrics:"] and "aer ↓" in line)
    assert "precision ↑" in aer
