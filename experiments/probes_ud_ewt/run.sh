#!/usr/bin/env bash
# Every run behind experiments/probes_ud_ewt/README.md, in order, then the figures and tables. From the repository root:
#   nice -n 10 bash experiments/probes_ud_ewt/run.sh
# N_JOBS: joblib workers per sweep (default 2; use 1 on a loaded machine). FULL_TRAIN=0 skips the full-data check.
# Each step's wall time, peak memory and the load average at its start are appended to $OUT/timings.tsv.
# A sweep re-run into the same dir only computes the jobs that have no finished results.
set -euo pipefail
export HF_HUB_OFFLINE=1
OUT=${OUT:-results/probes_ud_ewt}
N_JOBS=${N_JOBS:-2}
FULL_TRAIN=${FULL_TRAIN:-1}
HERE=experiments/probes_ud_ewt
LAUNCH="hydra/launcher=joblib hydra.launcher.n_jobs=$N_JOBS"
mkdir -p "$OUT"

timed() {  # timed NAME COMMAND...: run COMMAND; append NAME, wall s, peak KB, 1-min load at start, N_JOBS
  local name=$1 load
  shift
  load=$(cut -d' ' -f1 /proc/loadavg)
  /usr/bin/time -o "$OUT/.time" -f "%e	%M" "$@"
  printf '%s\t%s\t%s\t%s\n' "$name" "$(cat "$OUT/.time")" "$load" "$N_JOBS" >> "$OUT/timings.tsv"
}

# the attention stores of the three splits, built once (every probe job below reads them; none loads the model)
for split in train dev test; do
  timed "extract $split" probing task=extract data=ud_ewt data.split=$split hydra.run.dir=$OUT/extract/$split
done

# one job alone: the reference for a sweep's cost per job
timed "one job (relation, L0H0)" probing experiment=head_sweep probe.layer=0 probe.head=0 \
  hydra.run.dir=$OUT/single_L0H0

# per layer (6 jobs each): relation and arc probes
timed "layer sweep, relation (6 jobs)" probing -m experiment=layer_sweep $LAUNCH \
  hydra.sweep.dir=$OUT/layer_sweep_relation
probing-collect $OUT/layer_sweep_relation
timed "layer sweep, arc (6 jobs)" probing -m experiment=layer_sweep probe=arc $LAUNCH \
  hydra.sweep.dir=$OUT/layer_sweep_arc
probing-collect $OUT/layer_sweep_arc

# all 72 heads at once: relation, arc, edge
timed "all heads: relation, arc, edge (3 jobs)" probing -m experiment=probes_ud_ewt probe=relation,arc,edge $LAUNCH \
  hydra.sweep.dir=$OUT/all_heads
probing-collect $OUT/all_heads

# the edge probe again with non-arcs matched to the arcs' word distances (distance alone is then at chance)
timed "all heads: edge, distance-matched negatives (1 job)" probing experiment=probes_ud_ewt probe=edge \
  probe.negatives=distance_matched hydra.run.dir=$OUT/edge_matched

# one head at a time (72 jobs), relation probe
timed "head sweep, relation (72 jobs)" probing -m experiment=head_sweep $LAUNCH \
  hydra.sweep.dir=$OUT/head_sweep_relation
probing-collect $OUT/head_sweep_relation

# held out: the head and the layers chosen on dev (highest mean accuracy / UAS), scored on test
read -r L H < <(python $HERE/figures.py --select $OUT/head_sweep_relation accuracy)
timed "held out: best head on test" probing experiment=head_sweep probe.layer=$L probe.head=$H \
  probe.eval_split=test hydra.run.dir=$OUT/held_out/head_relation
read -r L _ < <(python $HERE/figures.py --select $OUT/layer_sweep_relation accuracy)
timed "held out: best layer on test, relation" probing experiment=layer_sweep probe.layer=$L \
  probe.eval_split=test hydra.run.dir=$OUT/held_out/layer_relation
read -r L _ < <(python $HERE/figures.py --select $OUT/layer_sweep_arc uas)
timed "held out: best layer on test, arc" probing experiment=layer_sweep probe=arc probe.layer=$L \
  probe.eval_split=test hydra.run.dir=$OUT/held_out/layer_arc
probing-collect $OUT/held_out

# all of EWT train instead of 1,500 sentences, for one layer's arc probe: what the subsample changes
if [ "$FULL_TRAIN" = 1 ]; then
  timed "layer 3 on all of EWT train: arc (1 job)" probing -m experiment=probes_ud_ewt probe=arc probe.layer=3 \
    probe.max_train_sentences=null $LAUNCH hydra.sweep.dir=$OUT/full_train_layer3
  probing-collect $OUT/full_train_layer3
fi

python $HERE/figures.py $OUT
python $HERE/figures.py --margins $OUT
