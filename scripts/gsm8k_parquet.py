"""Write a GSM8K split from the data folder as a Parquet file: the dataset of
``configs/gsm8k-chat.yaml`` (``make gsm8k-chat-inputs``).

Usage: ``python scripts/gsm8k_parquet.py OUT.parquet [--split train|test]``. Reads
``$GRPO_DATA_DIR/gsm8k/<split>.jsonl`` (``grpo.services.tasks.datasets.data_dir``) with
``pyarrow.json`` and writes its rows unchanged (``question``, ``answer``: the worked solution
ending with ``#### <answer>``) with ``pyarrow.parquet``.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def write_gsm8k_parquet(out: Path, split: str = "train") -> int:
    """Write GSM8K ``split`` to ``out`` (parents created); returns the rows written.

    Raises:
        NotFoundError: the data folder or the split's file is missing.
    """
    import pyarrow.json as pa_json
    import pyarrow.parquet as pq

    from grpo.errors import NotFoundError
    from grpo.services.tasks.datasets import data_dir

    source = data_dir() / "gsm8k" / f"{split}.jsonl"
    if not source.is_file():
        raise NotFoundError(f"{source} does not exist")
    table = pa_json.read_json(source)
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, out)
    return int(table.num_rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="Parquet file to write.")
    parser.add_argument("--split", choices=("train", "test"), default="train")
    args = parser.parse_args()
    rows = write_gsm8k_parquet(args.out, args.split)
    print(f"wrote {rows} rows to {args.out}")


if __name__ == "__main__":
    main()
