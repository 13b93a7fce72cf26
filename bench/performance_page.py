"""Write docs/performance.md from the JSON results of one GPU window
(``bench/gpu_mlm_throughput.py --out`` and ``bench/run_scaling.py --out``).

    python bench/performance_page.py --throughput T.json --scaling S.json --out docs/performance.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

TARGETS = """Targets: crossalign >= 1.5x the HF-style loop's tokens/s at 128 and 512, MFU >= 45%;
MLM+TLM within 10% of MLM's tokens/s; a 4 x 128 study model: aggregate tokens/s on one GPU
>= 8x a single run's."""


def throughput_table(result: dict) -> list[str]:
    """The Markdown rows of the loops' throughput."""
    lines = [
        "| seq | batch | loop | tokens/s | vs HF loop | MFU | executed | peak GiB | final loss |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        for loop, r in row.items():
            if not isinstance(r, dict):
                continue
            vs = f"{r['vs_hf']:.2f}x" if "vs_hf" in r else "-"
            ex = f"{r['executed_utilisation']:.1%}" if "executed_utilisation" in r else "-"
            lines.append(
                f"| {row['seq']} | {row['batch']} | {loop} | {r['tokens_per_s']:,.0f} | {vs} | "
                f"{r['mfu']:.1%} | {ex} | {r['peak_gib']:.1f} | {r['final_loss']:.3f} |"
            )
    return lines


def scaling_table(result: dict) -> list[str]:
    """The Markdown rows of the concurrent small runs."""
    lines = ["| processes | aggregate tokens/s | per process | vs one run |", "|---|---|---|---|"]
    for r in result["rows"]:
        n = r["processes"]
        total = r["aggregate_tokens_per_s"]
        lines.append(f"| {n} | {total:,.0f} | {total / n:,.0f} | {r['vs_one']:.2f}x |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--throughput", type=Path, required=True)
    parser.add_argument("--scaling", type=Path)
    parser.add_argument("--out", type=Path, default=Path("docs/performance.md"))
    args = parser.parse_args()
    t = json.loads(args.throughput.read_text(encoding="utf-8"))
    page = [
        "# Performance",
        "",
        f"Measured by `bench/gpu_window.sh` on one {t['device']} (torch {t['torch']}, "
        f"transformers {t['transformers']}, {t['precision']}), preset `{t['preset']}`, "
        f"{t['steps']} timed steps after {t['warmup']}. Every figure of a table was measured "
        "in the same run on the same card.",
        "",
        "## Training throughput",
        "",
        *throughput_table(t),
        "",
        "Loops: `hf` is the run_mlm-style loop a user would write; `hf-compile` is it with "
        "`torch.compile` and fused AdamW; `xa` is `crossalign train`; `-compile` sets "
        "`train.compile`; `xa-tlm` adds TLM on packed pairs. MFU counts the vocabulary head at "
        "every position; `executed` counts the FLOPs crossalign runs (the head at masked "
        "positions only).",
    ]
    if args.scaling:
        s = json.loads(args.scaling.read_text(encoding="utf-8"))
        page += [
            "",
            "## Many small runs on one GPU (CUDA MPS)",
            "",
            f"{s['layers']} x {s['hidden']} MLM, batch {s['batch']} x {s['seq']}, "
            f"{s['steps']} steps per run, all processes at once.",
            "",
            *scaling_table(s),
        ]
    page += ["", TARGETS, ""]
    args.out.write_text("\n".join(page), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
