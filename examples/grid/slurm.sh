#!/bin/sh
# Runs a grid of `terrace compare` as a Slurm job array, one task per shard, and merges the
# shards in a job that starts when every task has succeeded (docs/grids.md). Run it where you
# submit jobs, from a directory the compute nodes share:
#
#   examples/grid/slurm.sh [GRID.toml] [SHARDS]     # defaults: examples/grid/grid.toml, 8
#
# It needs `terrace` on the nodes' PATH (cargo install --locked --path crates/terrace). The
# shards' files, logs, the merged table (merge.log), grid.json and grid.csv go to $OUT
# (default grid-out). Each task runs its cells on the cores Slurm gives it (--cpus-per-task;
# rayon uses them all); `terrace compare merge` prints a shard that failed or is missing.
set -eu
grid=${1:-examples/grid/grid.toml}
shards=${2:-8}
out=${OUT:-grid-out}
cpus=${CPUS_PER_TASK:-8}
mkdir -p "$out"
# Single quotes: $SLURM_ARRAY_TASK_ID is each task's own, expanded when the task runs.
array=$(sbatch --parsable --job-name=terrace-grid --array="0-$((shards - 1))" \
    --cpus-per-task="$cpus" --output="$out/shard-%a.log" \
    --wrap='terrace compare --grid '"$grid"' --shard "$SLURM_ARRAY_TASK_ID/'"$shards"'" --json '"$out"'/shard-"$SLURM_ARRAY_TASK_ID".json')
merge=$(sbatch --parsable --job-name=terrace-grid-merge --dependency="afterok:$array" --output="$out/merge.log" \
    --wrap="terrace compare merge $out/shard-*.json --json $out/grid.json --csv $out/grid.csv")
echo "submitted array job $array ($shards shards of $grid); merge job $merge writes the table to $out/merge.log"
