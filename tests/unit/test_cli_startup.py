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
