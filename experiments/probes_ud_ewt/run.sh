#!/usr/bin/env bash
# Every run behind experiments/probes_ud_ewt/README.md, in order. Run from the repository root.
# The stores are built once (EWT train ~60 s, dev ~10 s); every job below reuses them.
set -euo pipefail
export HF_HUB_OFFLINE=1
OUT=${OUT:-results/probes_ud_ewt}
probing task=extract data=ud_ewt data.split=train
probing task=extract data=ud_ewt data.split=dev

# one job alone (the reference for the sweep's wall time), then the 72-head sweep, 2 jobs at a time
/usr/bin/time -f "single job wall %e s" probing experiment=head_sweep probe.layer=0 probe.head=0 \
  hydra.run.dir=$OUT/single_L0H0
/usr/bin/time -f "72-job sweep wall %e s" probing -m experiment=head_sweep hydra/launcher=joblib \
  hydra.launcher.n_jobs=2 hydra.sweep.dir=$OUT/head_sweep_relation
probing-collect $OUT/head_sweep_relation

# per layer: relation and arc probes
probing -m experiment=layer_sweep hydra/launcher=joblib hydra.launcher.n_jobs=2 \
  hydra.sweep.dir=$OUT/layer_sweep_relation
probing-collect $OUT/layer_sweep_relation
probing -m experiment=layer_sweep probe=arc hydra/launcher=joblib hydra.launcher.n_jobs=2 \
  hydra.sweep.dir=$OUT/layer_sweep_arc
probing-collect $OUT/layer_sweep_arc

# all 72 heads at once: relation, arc, edge
probing -m experiment=probes_ud_ewt probe=relation,arc,edge hydra.sweep.dir=$OUT/all_heads
probing-collect $OUT/all_heads

# full training data for one layer, to show what the 20k-arc subsample changes
probing -m experiment=probes_ud_ewt probe=relation,arc probe.layer=3 probe.max_train_sentences=null \
  hydra.sweep.dir=$OUT/full_train_layer3
probing-collect $OUT/full_train_layer3

python experiments/probes_ud_ewt/figures.py $OUT
