"""Every benchmark, one after the other (`make bench`). Each prints its figure as a ratio against a
baseline measured in the same run; see docs/performance.md.

    python bench/run_all.py            # the figures of docs/performance.md (several minutes)
    python bench/run_all.py --quick    # the same, small: a smoke run of the scripts
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNS = {
    "tee_throughput.py": (["--messages", "50000", "--repeat", "11"], ["--messages", "5000", "--repeat", "1"]),
    "tee_memory.py": (["--messages", "500000"], ["--messages", "5000"]),
    "tee_put.py": (["--chunk", "256", "--turns", "7"], ["--messages", "2000", "--turns", "1"]),
    "check_speed.py": (["--messages", "1000000", "--repeat", "3"], ["--messages", "10000", "--repeat", "1"]),
    "startup.py": (["--repeat", "15"], ["--repeat", "2"]),
    "http_latency.py": (["--chains", "600"], ["--chains", "20"]),
    "http_cpu.py": (["--chains", "2000", "--turns", "3"], ["--chains", "200", "--turns", "1"]),
    "proxy_hooks.py": (["--chains", "4000", "--turns", "7"], ["--chains", "200", "--turns", "1"]),
    "http_throughput.py": (["--turns", "9", "--seconds", "3"], ["--turns", "1", "--seconds", "1"]),
    "http_memory.py": (["--requests", "40000"], ["--requests", "2000"]),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Every benchmark, one after the other (make bench).")
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke run of the scripts")
    quick = ap.parse_args(argv).quick
    failed = []
    for script, (full, small) in RUNS.items():
        print(f"== bench/{script}", flush=True)
        t0 = time.perf_counter()
        if subprocess.run([sys.executable, str(HERE / script), *(small if quick else full)]).returncode != 0:
            failed.append(script)
        print(f"   ({time.perf_counter() - t0:.0f} s)\n", flush=True)
    if failed:
        print("failed to run: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
